"""Static check of a candidate's source: it parses, defines its entry point, and asks for nothing
that would change what the verdict means. No jax; nothing of the candidate runs here.

Untrusted code is contained by the OS and by the tracer/judge split, not by rules (DESIGN §4):
the candidate runs only in a sandboxed tracer (no other process's environment, no file outside
its directory, no network, no `execve`), whose only output the judge believes is the program it
carried; the judge, the timing and the profile run that program and never import the kernel.
So a rule that only kept a kernel from reaching something (a module, a file, a clock, an
attribute, interpreter internals, the harness, the platform at trace time, where jax sees only
the CPU) refused jax's own idioms and protected nothing: such rules are gone, and each route
they named is shown contained in tests/kernels/sandbox/ with the rules switched off.

What remains refuses what would change the verdict's meaning even though it is contained: host
Python computing the outputs (a callback from device code) and a program that branches on the
platform it runs on (interpret mode on the CPU would not judge what the TPU runs). The judge
refuses both in the carried program too (program_pickle.REFUSED); here they are named early,
with their line, for agents.

The rules judge what importing the file runs (its module-level statements) and every top-level
function or class the entry point can reach; reachability is conservative: any reference to a
name counts. So a JAXBench expert file's unused `benchmark()` helper is not held against it.
"""

from __future__ import annotations

import ast

from maxkernel_tui.kernels.evaluation.static.platform import platform_problem
from maxkernel_tui.kernels.limits import text_oversize_problem
from maxkernel_tui.kernels.report.reasons import RuleBroken, StaticRule
from maxkernel_tui.kernels.task import DEFAULT_ENTRY_POINTS

# Attribute names that call back into Python from device code: the host computes the output.
_CALLBACKS = {"pure_callback", "io_callback", "callback"}


def static_problems(
    source: str, filename: str = "kernel.py", entry_points: tuple[str, ...] = DEFAULT_ENTRY_POINTS
) -> list[str]:
    """Every rule the reachable source breaks, each a sentence naming the line; empty when
    clean. `entry_points`: the names a candidate may define (the first is the usual one)."""
    return [broken.text for broken in broken_rules(source, filename, entry_points)]


def broken_rules(
    source: str, filename: str = "kernel.py", entry_points: tuple[str, ...] = DEFAULT_ENTRY_POINTS
) -> list[RuleBroken]:
    """`static_problems`, each with the rule it breaks."""
    if too_large := text_oversize_problem(source, filename):
        # refused before parsing, which alone would take minutes
        return [RuleBroken(StaticRule.TOO_LARGE, too_large)]
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as error:
        return [
            RuleBroken(
                StaticRule.DOES_NOT_PARSE, f"does not parse: {error.msg} (line {error.lineno})"
            )
        ]
    defined = _top_level_names(tree)
    problems = []
    judged: list[ast.stmt] = reachable_statements(tree, entry_points)
    if not any(name in defined for name in entry_points):
        wanted = " or ".join(f"`{name}`" for name in entry_points)
        problems.append(
            RuleBroken(StaticRule.NO_ENTRY_POINT, f"does not define a top-level {wanted}")
        )
        judged = tree.body  # nothing is reachable: say everything that is wrong
    for statement in judged:
        for node in ast.walk(statement):
            if callback := _callback_problem(node):
                problems.append(RuleBroken(StaticRule.HOST_CALLBACK, callback))
            if platform := platform_problem(node):
                problems.append(RuleBroken(StaticRule.PLATFORM_BRANCH, platform))
    return list(dict.fromkeys(problems))  # one line per distinct problem, in source order


def _callback_problem(node: ast.AST) -> str | None:
    name: str | None = None
    if isinstance(node, ast.Attribute) and node.attr in _CALLBACKS:
        name = f".{node.attr}"
    elif isinstance(node, ast.ImportFrom):
        name = next((f"import {a.name}" for a in node.names if a.name in _CALLBACKS), None)
    if name is None:
        return None
    line = getattr(node, "lineno", "?")
    return (
        f"calls back into Python from device code (`{name}` at line {line}): the host, not the "
        "kernel, would compute the outputs"
    )


def _top_level_names(tree: ast.Module) -> dict[str, list[ast.stmt]]:
    """Each top-level name and the statements that define it (def, class, assignment)."""
    names: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        names.setdefault(leaf.id, []).append(node)
    return names


def _is_main_block(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":` never runs when the harness imports the file."""
    test = node.test if isinstance(node, ast.If) else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def reachable_statements(tree: ast.Module, entry_points: tuple[str, ...]) -> list[ast.stmt]:
    """What importing the file runs, plus the definitions the entry points can reach."""
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    defined = _top_level_names(tree)
    chosen: list[ast.stmt] = [
        node for node in tree.body if not isinstance(node, definitions) and not _is_main_block(node)
    ]
    pending = list(chosen) + [d for name in entry_points for d in defined.get(name, [])]
    seen: set[int] = {id(node) for node in chosen}
    while pending:
        node = pending.pop()
        if id(node) not in seen:
            seen.add(id(node))
            chosen.append(node)
        for leaf in ast.walk(node):
            if isinstance(leaf, ast.Name):
                pending.extend(d for d in defined.get(leaf.id, []) if id(d) not in seen)
    return sorted(chosen, key=lambda n: n.lineno)
