"""Where a task's input code takes its sizes from, read statically. No jax; nothing runs.

A size is a named integer the input builder uses: a local `batch_size = 4096` in `get_inputs`,
a module-level `HIDDEN = 8192` it reads, or an integer entry of JAXBench's `CONFIG` dict. Fixed
PRNG keys (`jax.random.key(0)`, `PRNGKey(42)`) are found so the run's seed can replace them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Literal

SiteKind = Literal["local", "module", "config"]
CONFIG_DICT = "CONFIG"  # JAXBench's module-level dict of dimensions
KEY_FUNCTIONS = frozenset({"key", "PRNGKey", "default_rng", "RandomState"})


@dataclass(frozen=True)
class SizeSite:
    name: str
    value: int
    kind: SiteKind
    line: int


# A shape written in the input builder: size names and integer literals, e.g. ("batch", 3, "h").
ShapeTuple = tuple[str | int, ...]


@dataclass(frozen=True)
class Sites:
    sizes: tuple[SizeSite, ...]
    keys: int  # fixed PRNG key calls in the input builder
    notes: tuple[str, ...]  # sizes left at production, with the reason
    shapes: tuple[ShapeTuple, ...] = ()  # the tuples of sizes the builder writes


def function(module: ast.Module, name: str) -> ast.FunctionDef | None:
    """The top-level function of that name; the last one when redefined (it is what runs)."""
    found = None
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            found = node
    return found


def find_sites(module: ast.Module, builder: str) -> Sites:
    """The sizes and PRNG keys of the input builder function `builder` (get_inputs or
    create_inputs); raises ValueError when there is no such function."""
    fn = function(module, builder)
    if fn is None:
        raise ValueError(f"no `{builder}` function")
    local = _int_assignments(fn.body)
    module_ints = _int_assignments(module.body)
    used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    sizes = [SizeSite(name, value, "local", line) for name, (value, line) in local.items()]
    sizes += [
        SizeSite(name, value, "module", line)
        for name, (value, line) in module_ints.items()
        if name in used and name not in local
    ]
    sizes += _config_sizes(module)
    named = {site.name for site in sizes}
    return Sites(tuple(sizes), _count_keys(fn), tuple(_literal_notes(fn)), _shapes(fn, named))


def _shapes(fn: ast.FunctionDef, names: set[str]) -> tuple[ShapeTuple, ...]:
    """Tuples of size names and integer literals with at least one size name: the shapes the
    builder makes (a tuple with anything else in it is not read as a shape)."""
    shapes: list[ShapeTuple] = []
    for node in ast.walk(fn):
        if not isinstance(node, ast.Tuple) or not node.elts:
            continue
        shape: list[str | int] = []
        for element in node.elts:
            if isinstance(element, ast.Name) and element.id in names:
                shape.append(element.id)
            elif _is_int(element):
                shape.append(element.value)  # type: ignore[attr-defined]
            else:
                break
        else:
            if any(isinstance(part, str) for part in shape):
                shapes.append(tuple(shape))
    return tuple(shapes)


def _int_assignments(body: list[ast.stmt]) -> dict[str, tuple[int, int]]:
    """`name = 4096` and `a, b = 8, 128` at the top of a body (not inside branches)."""
    found: dict[str, tuple[int, int]] = {}
    for node in body:
        if not isinstance(node, ast.Assign):
            continue
        value = node.value
        pairs: list[tuple[ast.expr, ast.expr]] = [(target, value) for target in node.targets]
        first = node.targets[0]
        if len(node.targets) == 1 and isinstance(first, ast.Tuple) and isinstance(value, ast.Tuple):
            pairs = list(zip(first.elts, value.elts))
        for name, constant in pairs:
            if isinstance(name, ast.Name) and _is_int(constant):
                found[name.id] = (constant.value, node.lineno)  # type: ignore[attr-defined]
    return found


def _is_int(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
    )


def config_dict(module: ast.Module) -> ast.Dict | None:
    for node in module.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == CONFIG_DICT for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            return node.value
    return None


def _config_sizes(module: ast.Module) -> list[SizeSite]:
    table = config_dict(module)
    if table is None:
        return []
    return [
        SizeSite(key.value, value.value, "config", value.lineno)  # type: ignore[attr-defined]
        for key, value in zip(table.keys, table.values)
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and _is_int(value)
    ]


def is_key_call(node: ast.AST) -> bool:
    """`jax.random.key(...)`, `random.PRNGKey(...)`, `key(...)` after `from jax.random import`."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name in KEY_FUNCTIONS


def _count_keys(fn: ast.FunctionDef) -> int:
    return sum(1 for node in ast.walk(fn) if is_key_call(node))


def _literal_notes(fn: ast.FunctionDef) -> list[str]:
    """Large integer literals written inside shape tuples: they stay at production size."""
    notes = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Tuple):
            for element in node.elts:
                if _is_int(element) and element.value > 512:  # type: ignore[attr-defined]
                    notes.append(
                        f"the literal {element.value} at line {element.lineno} is not a named "  # type: ignore[attr-defined]
                        "size: left at its production value"
                    )
    return notes
