"""Static check of a candidate's source: it parses, defines `computation`, and stays inside the
kernel. No jax; nothing of the candidate runs here.

A candidate may import only jax, numpy and a few pure standard-library modules. It may not
touch clocks, the environment, processes, files, the import system, the reference or this
harness; it may not patch library attributes, keep global state or call back into Python from
device code. Each rule answers one known way of fooling a harness.

The rules judge what importing the file runs (its module-level statements) and every top-level
function or class the entry point can reach; reachability is conservative: any reference to a
name counts. So a JAXBench expert file's unused `benchmark()` timing helper and its `__main__`
block are not held against it, while a clock reached from `workload` still is.
"""

from __future__ import annotations

import ast

from maxkernel_tui.kernels.limits import text_oversize_problem

ALLOWED_MODULES = {
    "jax",
    "jaxlib",
    "numpy",
    "functools",
    "math",
    "typing",
    "dataclasses",
    "itertools",
    "operator",
    "collections",
    "enum",
    "__future__",
    "ml_dtypes",
}

_WHY_MODULE = {
    "time": "touches clocks",
    "datetime": "touches clocks",
    "timeit": "touches clocks",
    "os": "reaches the environment or the process",
    "sys": "reaches the environment or the process",
    "subprocess": "starts processes",
    "socket": "opens network connections",
    "importlib": "uses the import system",
    "inspect": "inspects frames and modules",
    "ctypes": "calls native code",
    "gc": "inspects live objects",
    "builtins": "patches builtins",
    "pickle": "loads pickled objects",
    "threading": "starts threads",
    "multiprocessing": "starts processes",
    "reference": "imports the reference",
    "maxkernel_tui": "imports the harness",
}

_FORBIDDEN_CALLS = {
    "__import__": "imports modules dynamically",
    "exec": "executes generated code",
    "eval": "evaluates generated code",
    "compile": "compiles generated code",
    "open": "opens files",
    "globals": "reaches module globals",
    "locals": "reaches frame locals",
    "vars": "reaches object namespaces",
    "setattr": "patches attributes",
    "delattr": "patches attributes",
    "breakpoint": "enters a debugger",
    "input": "reads standard input",
}

# Attribute paths that escape device code or change the numerics under the harness.
_FORBIDDEN_ATTRIBUTES = {
    "pure_callback": "calls back into Python from device code",
    "io_callback": "calls back into Python from device code",
    "callback": "calls back into Python from device code",
    "config": "changes jax configuration",
    "block_until_ready": "touches the timing path (block_until_ready)",
    "environ": "reads the environment",
    "getenv": "reads the environment",
    "perf_counter": "touches clocks",
    "monotonic": "touches clocks",
}


def static_problems(
    source: str, filename: str = "kernel.py", entry_points: tuple[str, ...] = ("computation",)
) -> list[str]:
    """Every rule the reachable source breaks, each a sentence naming the line; empty when
    clean. `entry_points`: the names a candidate may define (the first is the usual one)."""
    if too_large := text_oversize_problem(source, filename):
        return [too_large]  # refused before parsing, which alone would take minutes
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as error:
        return [f"does not parse: {error.msg} (line {error.lineno})"]
    defined = _top_level_names(tree)
    problems = []
    judged: list[ast.stmt] = reachable_statements(tree, entry_points)
    if not any(name in defined for name in entry_points):
        wanted = " or ".join(f"`{name}`" for name in entry_points)
        problems.append(f"does not define a top-level {wanted}")
        judged = tree.body  # nothing is reachable: say everything that is wrong
    imported_names = _imported_names(tree)
    for statement in judged:
        for node in ast.walk(statement):
            problems.extend(_node_problems(node, imported_names))
    return list(dict.fromkeys(problems))  # one line per distinct problem, in source order


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


def _imported_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names


def _node_problems(node: ast.AST, imported_names: set[str]) -> list[str]:
    line = getattr(node, "lineno", "?")
    if isinstance(node, ast.Import):
        problems = (_module_problem(alias.name, line) for alias in node.names)
        return [problem for problem in problems if problem]
    if isinstance(node, ast.ImportFrom):
        module = "." * node.level + (node.module or "")
        problem = _module_problem(module, line)
        return [problem] if problem else []
    if isinstance(node, ast.Global):
        return [f"keeps state across calls (`global` at line {line})"]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FORBIDDEN_CALLS
    ):
        return [f"{_FORBIDDEN_CALLS[node.func.id]} (`{node.func.id}` at line {line})"]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        if len(node.args) < 2 or not (
            isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
        ):
            return [f"looks up attributes by computed name (`getattr` at line {line})"]
        if node.args[1].value in _FORBIDDEN_ATTRIBUTES or node.args[1].value.startswith("__"):
            return [f"reaches `{node.args[1].value}` through getattr (line {line})"]
    if isinstance(node, ast.Attribute):
        if (
            node.attr.startswith("__")
            and node.attr.endswith("__")
            and node.attr not in ("__name__", "__doc__")
        ):
            return [f"uses interpreter internals (`{node.attr}` at line {line})"]
        if node.attr in _FORBIDDEN_ATTRIBUTES:
            return [f"{_FORBIDDEN_ATTRIBUTES[node.attr]} (`.{node.attr}` at line {line})"]
    if isinstance(node, ast.Name) and node.id in (
        "__builtins__",
        "__loader__",
        "__spec__",
        "__file__",
    ):
        return [f"uses interpreter internals (`{node.id}` at line {line})"]
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            root = _attribute_root(target)
            if root is not None and root in imported_names:
                return [f"patches a library attribute (`{ast.unparse(target)}` at line {line})"]
    return []


def _module_problem(module: str, line: object) -> str | None:
    top = module.lstrip(".").split(".")[0]
    if module.startswith("."):
        return f"imports from its own folder (`{module}` at line {line})"
    if top in ALLOWED_MODULES:
        return None
    why = _WHY_MODULE.get(top, "imports a module outside the allowed set")
    allowed = ", ".join(sorted(ALLOWED_MODULES - {"__future__"}))
    return f"{why} (`import {module}` at line {line}; allowed: {allowed})"


def _attribute_root(target: ast.AST) -> str | None:
    """`jax.numpy.exp = f` -> "jax"; plain names and subscripts of locals -> None."""
    if not isinstance(target, ast.Attribute):
        return None
    node: ast.AST = target
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None
