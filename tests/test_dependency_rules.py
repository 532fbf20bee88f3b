"""Layout rules of DESIGN.md §2, enforced: who may import whom, and no jax in the UI."""

import ast
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "maxkernel_tui"


def imported_modules(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def imports_of(subpackage: str) -> dict[str, set[str]]:
    return {
        str(p.relative_to(PACKAGE)): imported_modules(p)
        for p in (PACKAGE / subpackage).rglob("*.py")
        if "suite" not in p.parts
    }


def test_kernels_is_a_library():
    forbidden = (
        "maxkernel_tui.agents",
        "maxkernel_tui.screens",
        "maxkernel_tui.themes",
        "maxkernel_tui.app",
        "textual",
    )
    for module, names in imports_of("kernels").items():
        bad = [n for n in names if n.startswith(forbidden)]
        assert not bad, f"{module} imports {bad}"


def test_agents_never_import_textual():
    for module, names in imports_of("agents").items():
        bad = [
            n
            for n in names
            if n.startswith(("textual", "maxkernel_tui.screens", "maxkernel_tui.app"))
        ]
        assert not bad, f"{module} imports {bad}"


def test_ui_and_cli_do_not_import_jax():
    code = (
        "import sys, maxkernel_tui.cli, maxkernel_tui.app, maxkernel_tui.screens.task_picker, "
        "maxkernel_tui.kernels.catalog, maxkernel_tui.kernels.listing, maxkernel_tui.kernels.evaluation.harness, "
        "maxkernel_tui.commands.evaluate, maxkernel_tui.commands.bench; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_workbench_starts_without_the_agents_engine():
    """Start-up time (first frame within 1.5x of a bare Textual app): the engine, its events and
    the model clients load when the agents first run."""
    code = (
        "import sys, maxkernel_tui.cli, maxkernel_tui.app; print(sorted(m for m in sys.modules if m.startswith("
        "('maxkernel_tui.agents.orchestration.engine', 'maxkernel_tui.agents.orchestration.events', "
        "'maxkernel_tui.agents.llm', 'google'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_modules_stay_small():
    for path in PACKAGE.rglob("*.py"):
        assert len(path.read_text().splitlines()) <= 600, f"{path} passes 600 lines: split it"


def test_the_ui_never_imports_the_commands():
    """The screens and the app share the CLI's helpers through maxkernel_tui.services, never
    through the commands themselves."""
    ui = {**imports_of("screens"), "app.py": imported_modules(PACKAGE / "app.py")}
    for module, names in ui.items():
        bad = [n for n in names if n.startswith("maxkernel_tui.commands")]
        assert not bad, f"{module} imports {bad}"
