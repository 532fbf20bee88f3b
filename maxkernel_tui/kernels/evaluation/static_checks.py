"""Static check of a candidate's source: it parses, defines `computation`, and stays inside the
kernel. No jax; nothing of the candidate runs here.

A candidate may import only jax, numpy and a few pure standard-library modules. It may not
touch clocks, the environment, processes, files, the import system, the reference or this
harness; it may not patch library attributes, keep global state or call back into Python from
device code. Each rule answers one known way of fooling a harness.

These rules are fast, readable feedback for agents, not the defence: numpy and jax alone give
file, URL and pickle I/O and re-export `os`, so what a candidate can reach is decided by the OS
sandbox its worker runs in (kernels/sandbox); no guarantee rests on the rules.

The rules judge what importing the file runs (its module-level statements) and every top-level
function or class the entry point can reach; reachability is conservative: any reference to a
name counts. So a JAXBench expert file's unused `benchmark()` timing helper and its `__main__`
block are not held against it, while a clock reached from `workload` still is.
"""

from __future__ import annotations

import ast

from maxkernel_tui.kernels.evaluation.static_platform import platform_problem
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

# Functions of numpy (and jax.numpy) that read or write files, open URLs or unpickle.
_FILE_FUNCTIONS = {
    "load",
    "save",
    "savez",
    "savez_compressed",
    "savetxt",
    "loadtxt",
    "genfromtxt",
    "fromfile",
    "fromregex",
    "memmap",
    "DataSource",
    "open_memmap",
}
_ARRAY_FILE_METHODS = {"tofile", "dump", "dumps"}
_ATTRIBUTE_BY_NAME = {"attrgetter", "methodcaller"}

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
    modules = _module_aliases(tree)
    for statement in judged:
        for node in ast.walk(statement):
            problems.extend(_node_problems(node, imported_names))
            problems.extend(_reach_problems(node, modules))
            if platform := platform_problem(node):
                problems.append(platform)
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


def _module_aliases(tree: ast.Module) -> dict[str, str]:
    """Each name bound by an import to the module it stands for: `np` -> numpy,
    `jnp` -> jax.numpy (`from jax import numpy as jnp` too)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _reach_problems(node: ast.AST, modules: dict[str, str]) -> list[str]:
    """Routes from allowed modules to what they re-export: a forbidden or private module
    imported by name, numpy's file, URL and pickle functions, attributes by dunder strings."""
    line = getattr(node, "lineno", "?")
    if isinstance(node, ast.ImportFrom) and not node.level:
        for alias in node.names:
            if alias.name in _WHY_MODULE or alias.name.startswith("_"):
                return [
                    f"reaches `{alias.name}` through `{node.module}` "
                    f"(`from {node.module} import {alias.name}` at line {line})"
                ]
    if isinstance(node, ast.Attribute):
        path = _dotted(node, modules)
        in_numpy = path is not None and path.startswith(("numpy.", "jax.numpy."))
        if in_numpy and node.attr in _FILE_FUNCTIONS:
            return [f"reads or writes files (`{ast.unparse(node)}` at line {line})"]
        if node.attr in _ARRAY_FILE_METHODS:
            return [f"writes or pickles arrays (`.{node.attr}` at line {line})"]
    if isinstance(node, ast.Call) and _callee_name(node) in _ATTRIBUTE_BY_NAME:
        for argument in node.args:
            if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
                return [
                    f"looks up attributes by computed name (`{_callee_name(node)}` at line {line})"
                ]
            if "__" in argument.value:
                return [f"reaches `{argument.value}` by name (line {line})"]
    return []


def _dotted(node: ast.Attribute, modules: dict[str, str]) -> str | None:
    """`np.lib.npyio.load` -> "numpy.lib.npyio.load" where `np` names numpy, else None."""
    parts = [node.attr]
    value: ast.AST = node.value
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    if not isinstance(value, ast.Name) or value.id not in modules:
        return None
    return ".".join([modules[value.id], *reversed(parts)])


def _callee_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


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
    private = next((part for part in module.split(".")[1:] if part.startswith("_")), None)
    if top in ALLOWED_MODULES and private is not None:
        return f"imports a private module (`{module}` at line {line})"
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
