"""Static check of a candidate's source: it parses, defines `computation`, and stays inside the
kernel. No jax; nothing of the candidate runs here.

A candidate may import only jax, numpy and a few pure standard-library modules. It may not
touch clocks, the environment, processes, files, the import system, the reference or this
harness; it may not patch library attributes, keep global state or call back into Python from
device code. Each rule answers one known way of fooling a harness.
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


def static_problems(source: str, filename: str = "kernel.py") -> list[str]:
    """Every rule the source breaks, each a sentence naming the line; empty when clean."""
    if too_large := text_oversize_problem(source, filename):
        return [too_large]  # refused before parsing, which alone would take minutes
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as error:
        return [f"does not parse: {error.msg} (line {error.lineno})"]
    problems = [] if _defines_computation(tree) else ["does not define a top-level `computation`"]
    imported_names = _imported_names(tree)
    for node in ast.walk(tree):
        problems.extend(_node_problems(node, imported_names))
    return list(dict.fromkeys(problems))  # one line per distinct problem, in source order


def _defines_computation(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "computation":
            return True
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "computation" for t in node.targets
        ):
            return True
    return False


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
