"""How many of the built-in suite's 50 tasks, rewritten in MaxKernel's plain adapted format, get
derived `check` and `heldout` that validate (`maxkernel-tui tasks --json --no-cost --path DIR`).

Each suite reference is rewritten as MaxKernel's dataset writes a task: `CONFIGS` gone,
`get_inputs()` without arguments builds the production inputs from a dict of sizes inside it
(`c = {'batch': 4, ...}`, read as `c['batch']`: a third of MaxKernel's dataset) and a fixed key
(`jax.random.key(0)`). A task counts when its derivation is derived and describing it (tracing
every configuration, running the reference on `check`) gives no error. With `--baseline DIR`
(another checkout's source, e.g. `git archive main` unpacked) the same folders are described by
that code too, in the same run. Writes benchmarks/results/describe_suite_plain.md.

    python benchmarks/describe_suite_plain.py [--baseline DIR]
"""

from __future__ import annotations

import argparse
import ast
import datetime
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.describe_plain_tasks import run_tasks  # noqa: E402
from maxkernel_tui.kernels.loader import builtin_suite_dir  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "describe_suite_plain.md"
COMMAND = "python benchmarks/describe_suite_plain.py"


class _Plain(ast.NodeTransformer):
    """`CONFIGS[config]` -> the production dict, `seed` -> 0, `get_inputs()` without arguments."""

    def __init__(self, bench: ast.expr) -> None:
        self.bench = bench

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == "CONFIGS":
            return ast.copy_location(self.bench, node)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == "seed" and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Constant(0), node)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        if node.name == "get_inputs":
            node.args = ast.arguments([], [], None, [], [], None, [])
        return self.generic_visit(node)


def plain_source(source: str) -> str:
    """A suite reference.py in the plain adapted format."""
    tree = ast.parse(source)
    configs = next(
        node
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "CONFIGS" for t in node.targets)
    )
    assert isinstance(configs.value, ast.Dict)
    bench = next(
        v
        for k, v in zip(configs.value.keys, configs.value.values)
        if isinstance(k, ast.Constant) and k.value == "bench"
    )
    tree.body.remove(configs)
    return ast.unparse(ast.fix_missing_locations(_Plain(bench).visit(tree))) + "\n"


def write_tasks(root: Path) -> list[str]:
    written = []
    for folder in sorted(
        p for p in builtin_suite_dir().iterdir() if (p / "reference.py").is_file()
    ):
        target = root / folder.name
        shutil.copytree(folder, target)
        (target / "reference.py").write_text(plain_source((folder / "reference.py").read_text()))
        written.append(folder.name)
    return written


def tally(listing: dict) -> tuple[list[str], list[str]]:
    """(derived and validated task ids, failures with their reason)."""
    derived, failures = [], []
    for record in listing["tasks"]:
        derivation = record.get("derivation") or {}
        error = record.get("error")
        if error or not derivation.get("derived"):
            reason = str(error or derivation.get("fallback"))
            failures.append(f"- {record.get('task_id')}: {reason[:300]}")
        else:
            derived.append(record["task_id"])
    return derived, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mkt-suite-plain-"))
    names = write_tasks(root / "tasks")
    load = os.getloadavg()[0]
    lines = [
        "# The built-in suite rewritten in MaxKernel's plain format: derived configurations",
        "",
        f"`{COMMAND}`, {datetime.date.today()}, on this {os.cpu_count()}-core machine, shared "
        f"(1-minute load average {load:.1f} at the start): `maxkernel-tui tasks --json --no-cost "
        f"--path DIR` over {len(names)} folders, cold cache. Measured counts.",
        "",
    ]
    runs = [("this checkout", ROOT)]
    if args.baseline is not None:
        runs.insert(0, (f"baseline `{args.baseline}`", args.baseline.resolve()))
    for label, code in runs:
        seconds, listing = run_tasks(root / "tasks", root / f"cache-{len(lines)}", code, True)
        derived, failures = tally(listing)
        lines += [
            f"## {label}: {len(derived)} of {len(names)} derived and validated ({seconds:.0f} s)",
            "",
            *failures,
            "",
        ]
    RESULTS.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
