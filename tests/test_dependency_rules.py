"""The layout's import rules, enforced: who may import whom, no jax in the UI, and no test
module importing another.

Each contract names a part of the package, the modules it must never import, and why:
- `kernels` is a library: no agents, screens, themes, app or Textual;
- `agents` never import Textual or the UI;
- `agents.llm` is the bottom of the agents: no built-in agent, engine or search (providers of
  every kind are put together in `agents.providers`);
- `store` never imports the agents or the UI;
- the UI (`screens`, `app.py`) never imports the CLI's `commands`;
- screens never run the harness or the profiler, nor open the store: services/ does;
- screens and commands reach evaluation only through the service (kernels/service/);
- the UI and the CLI never import jax (worker processes do).
"""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "maxkernel_tui"
UI = ("textual", "maxkernel_tui.screens", "maxkernel_tui.themes", "maxkernel_tui.app")


def imported_modules(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def imports_of(subpackage: str) -> dict[str, set[str]]:
    """Every module under `subpackage` (a folder, or one `.py` file), with what it imports."""
    where = PACKAGE / subpackage
    paths = [where] if where.suffix == ".py" else where.rglob("*.py")
    return {
        str(p.relative_to(PACKAGE)): imported_modules(p) for p in paths if "suite" not in p.parts
    }


def breaches(subpackage: str, forbidden: tuple[str, ...]) -> list[str]:
    """`module imports name` for each import under `subpackage` of a module in `forbidden`."""
    return [
        f"{module} imports {name}"
        for module, names in sorted(imports_of(subpackage).items())
        for name in sorted(names)
        if name.startswith(forbidden)
    ]


def test_kernels_is_a_library():
    assert breaches("kernels", ("maxkernel_tui.agents", *UI)) == []


def test_agents_never_import_textual():
    assert breaches("agents", UI) == []


def test_llm_never_imports_the_agents_above_it():
    above = (
        "maxkernel_tui.agents.builtin",
        "maxkernel_tui.agents.orchestration",
        "maxkernel_tui.agents.search",
        "maxkernel_tui.agents.providers",
        *UI,
    )
    assert breaches("agents/llm", above) == []


def test_store_never_imports_the_agents_or_the_ui():
    assert breaches("store", ("maxkernel_tui.agents", *UI)) == []


def test_the_ui_never_imports_the_cli_commands():
    found = breaches("screens", ("maxkernel_tui.commands",))
    assert found + breaches("app.py", ("maxkernel_tui.commands",)) == []


def test_screens_never_run_the_harness_or_the_profiler():
    """One route from the domain to the panes: evaluations and profiles go through the
    workbench's session (services/workbench_session.py) on the agents' tools, and come back as
    the panes' messages; no screen starts the harness or the profiler itself."""
    domain = (
        "maxkernel_tui.kernels.evaluation.harness",
        "maxkernel_tui.kernels.evaluation.profiling.profile",
    )
    assert breaches("screens", domain) == []


# evaluation, and what carries it to a Ray node (doctor may still look at the cluster itself)
EVALUATION = (
    "maxkernel_tui.kernels.evaluation",
    "maxkernel_tui.kernels.executors.jobs",
    "maxkernel_tui.kernels.executors.node_service",
    "maxkernel_tui.kernels.executors.ray_dispatch",
)
# the agents' wrappers over the service, and the executors they used to hold
AGENTS_EVALUATION = ("maxkernel_tui.agents.executors", "maxkernel_tui.agents.orchestration.tools")


def test_screens_and_commands_reach_evaluation_only_through_the_service():
    """`kernels/service/` is the one front door: the CLI's commands and the UI reach the
    harness, the profiler and the executors through it (its service, setup and facts modules),
    never by importing evaluation modules themselves or by climbing into the agents' tools."""
    found = [
        breach
        for part in ("screens", "app.py", "commands")
        for breach in breaches(part, (*EVALUATION, *AGENTS_EVALUATION))
    ]
    assert found == []


def test_the_front_door_rule_sees_a_breach():
    assert breaches("kernels/executors/node_service.py", EVALUATION) != []


def modules_importing(name: str) -> tuple[str, ...]:
    """The package's modules that import `name` themselves, as dotted names (only the files
    that mention it are parsed)."""
    dotted = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if name not in path.read_text():
            continue
        if any(n == name or n.startswith(name + ".") for n in imported_modules(path)):
            module = path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
            dotted.append(module.removesuffix(".__init__"))
    return tuple(dotted)


def test_screens_never_read_the_store_themselves():
    """The search screen, the sessions list and the workbench read the store through services/
    (search_feed.py, sessions.py, workbench_session.py): no screen opens the database, neither
    through `store.db` nor through a module that talks to SQLite itself."""
    sqlite = modules_importing("sqlite3")
    assert "maxkernel_tui.store.db" in sqlite  # the rule would be empty without it
    found = [
        f"{module} imports {name}"
        for module, names in sorted(imports_of("screens").items())
        for name in sorted(names)
        if name in ("sqlite3", "maxkernel_tui.store", *sqlite)
    ]
    assert found == []


def test_no_test_module_imports_another():
    """Shared test code lives in tests.support and tests.fakes; conftest fixtures come by name."""
    shared = ("tests.support", "tests.fakes")
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if "data" not in path.relative_to(ROOT / "tests").parts
        for name in sorted(imported_modules(path))
        if (name == "tests" or name.startswith("tests.")) and not name.startswith(shared)
    ]
    assert found == []


def test_ui_and_cli_do_not_import_jax():
    code = (
        "import sys, maxkernel_tui.cli, maxkernel_tui.app, maxkernel_tui.screens.task_picker, "
        "maxkernel_tui.kernels.catalog, maxkernel_tui.kernels.listing, "
        "maxkernel_tui.kernels.evaluation.harness, "
        "maxkernel_tui.commands.evaluate, maxkernel_tui.commands.bench; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_workbench_starts_without_the_agents_engine():
    """Start-up time (first frame within 1.5x of a bare Textual app): the engine, its events and
    the model clients load when the agents first run, the harness when the first evaluation
    does, the subcommands' modules only for a subcommand, the screens not shown first (and
    help) when first shown, the proposals' highlighting with the first proposal, the
    derivation of sizes with the first plain task, tasks' descriptions when described, and
    the store's rows when the store is read."""
    code = (
        "import sys, maxkernel_tui.cli, maxkernel_tui.app; "
        # what cli._open_app imports before the app runs (without --resume), a built-in task
        "import maxkernel_tui.services.tasks; "
        "maxkernel_tui.cli._parse(['--task', '12p', '--sandbox', 'on']); "
        "maxkernel_tui.services.tasks.resolve_task('12p'); "
        "print(sorted(m for m in sys.modules if m.startswith("
        "('maxkernel_tui.agents.orchestration.engine', "
        "'maxkernel_tui.agents.orchestration.events', "
        "'maxkernel_tui.agents.llm', 'google', "
        "'maxkernel_tui.kernels.evaluation.harness', 'maxkernel_tui.commands.', "
        "'maxkernel_tui.screens.task_picker', 'maxkernel_tui.screens.sessions', "
        "'maxkernel_tui.screens.settings', 'maxkernel_tui.kernels.perf.', "
        "'maxkernel_tui.kernels.importers.', 'maxkernel_tui.store.db', 'sqlite3', "
        "'maxkernel_tui.services.sessions', 'maxkernel_tui.screens.help', 'rich.syntax', "
        "'maxkernel_tui.kernels.derive.', 'maxkernel_tui.kernels.description', "
        "'maxkernel_tui.store.rows'))))"
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


RAY_MODULES = (
    "kernels/executors/ray_cluster.py",
    "kernels/executors/ray_dispatch.py",
    "kernels/service/ray_backend.py",
)


def test_only_the_ray_executor_modules_import_ray():
    found = [
        f"{module} imports {name}"
        for part in ("kernels", "agents", "commands", "screens", "services", "store")
        for module, names in sorted(imports_of(part).items())
        for name in sorted(names)
        if name.split(".")[0] == "ray" and module not in RAY_MODULES
    ]
    assert found == []


def test_ray_is_imported_only_when_the_ray_executor_is_chosen():
    """Not by the UI at start-up, the CLI, or a session opened on the local executor."""
    code = (
        "import sys, maxkernel_tui.cli, maxkernel_tui.app, maxkernel_tui.commands.search, "
        "maxkernel_tui.commands.bench, maxkernel_tui.commands.run, maxkernel_tui.commands.doctor, "
        "maxkernel_tui.agents.orchestration.session, maxkernel_tui.agents.search.launch; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ray'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def _room_arrows(folder: pathlib.Path) -> dict[str, set[str]]:
    """The rooms directly inside `folder` (its modules and subpackages), each with the rooms of
    the same folder it imports (TYPE_CHECKING imports count: they are arrows all the same)."""
    package = ".".join(folder.relative_to(ROOT).parts)
    arrows: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        if "suite" in path.parts:
            continue
        parts = path.relative_to(folder).parts
        room = parts[0].removesuffix(".py")
        if room == "__init__":
            continue
        for name in imported_modules(path):
            if name.startswith(package + "."):
                other = name[len(package) + 1 :].split(".")[0]
                if other != room:
                    arrows.setdefault(room, set()).add(other)
    return arrows


def _circles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The rooms that reach themselves through the arrows, one sorted list per circle."""
    found = []
    for start in sorted(arrows):
        reached = _reach(arrows, start)
        if start in reached:
            circle = sorted(r for r in reached if start in _reach(arrows, r))
            if circle not in found:
                found.append(circle)
    return found


def _reach(arrows: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), list(arrows.get(start, ()))
    while todo:
        room = todo.pop()
        if room not in seen:
            seen.add(room)
            todo.extend(arrows.get(room, ()))
    return seen


def test_no_arrow_runs_back_up_inside_kernels():
    """Inside `kernels/`, at every folder, the modules and subpackages import one another one
    way only: whatever a room imports sits below it, so each can be read (and moved) with what
    it stands on and nothing above."""
    folders = [PACKAGE / "kernels"] + [
        p.parent for p in (PACKAGE / "kernels").rglob("__init__.py") if "suite" not in p.parts
    ]
    found = {
        str(folder.relative_to(PACKAGE)): circles
        for folder in sorted(set(folders))
        if (circles := _circles(_room_arrows(folder)))
    }
    assert found == {}


def test_the_circle_finder_sees_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
