"""Keeps each suite task's yaml `input_gen_code` equal to the inputs code of its reference.py.

Other harnesses (MaxKernel's) build inputs from the yaml alone; ours reads reference.py. The
yaml copy is generated, never edited by hand:
    python -m maxkernel_tui.kernels.suite_sync [--check]
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from maxkernel_tui.kernels.loader import builtin_task_dirs
from maxkernel_tui.kernels.task import REFERENCE_PY, TASK_YAML

_KEY = "input_gen_code:"


def input_gen_code(reference_source: str) -> str:
    """Imports, CONFIGS, get_inputs and the top-level functions it uses, in source order."""
    module = ast.parse(reference_source)
    definitions = {n.name: n for n in module.body if isinstance(n, ast.FunctionDef)}
    needed = _functions_used_by("get_inputs", definitions)
    imports, definitions_used = [], []
    for node in module.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(node)
        elif (
            isinstance(node, ast.Assign)
            and any(getattr(t, "id", None) == "CONFIGS" for t in node.targets)
        ) or (isinstance(node, ast.FunctionDef) and node.name in needed):
            definitions_used.append(node)
    blocks = ["\n".join(_segment(reference_source, n) for n in imports)]
    blocks += [_segment(reference_source, n) for n in definitions_used]
    return "\n\n".join(blocks) + "\n"


def _segment(source: str, node: ast.AST) -> str:
    """The source of a top-level statement (ast gives None only for nodes without positions)."""
    return ast.get_source_segment(source, node) or ""


def synced_yaml(yaml_text: str, code: str) -> str:
    """The yaml with its input_gen_code block (always last) replaced by `code`."""
    kept = yaml_text.split(f"\n{_KEY}", 1)[0].rstrip("\n")
    body = "".join(f"  {line}\n" if line else "\n" for line in code.splitlines())
    return f"{kept}\n{_KEY} |\n{body}"


def _functions_used_by(name: str, definitions: dict[str, ast.FunctionDef]) -> set[str]:
    used, frontier = {name}, [name]
    while frontier:
        for node in ast.walk(definitions[frontier.pop()]):
            if isinstance(node, ast.Name) and node.id in definitions and node.id not in used:
                used.add(node.id)
                frontier.append(node.id)
    return used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="report stale tasks, change nothing")
    parser.add_argument("--path", type=Path, help="one folder of tasks (default: the built-in)")
    args = parser.parse_args(argv)
    stale = []
    roots = (args.path,) if args.path is not None else builtin_task_dirs()
    folders = sorted(p for root in roots for p in root.iterdir() if (p / REFERENCE_PY).is_file())
    for folder in folders:
        yaml_path = folder / TASK_YAML
        current = yaml_path.read_text(encoding="utf-8")
        wanted = synced_yaml(
            current, input_gen_code((folder / REFERENCE_PY).read_text(encoding="utf-8"))
        )
        if wanted != current:
            stale.append(folder.name)
            if not args.check:
                yaml_path.write_text(wanted, encoding="utf-8")
    verb = "stale" if args.check else "updated"
    print(f"{len(stale)} {verb}: {' '.join(stale)}" if stale else "all in sync")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
