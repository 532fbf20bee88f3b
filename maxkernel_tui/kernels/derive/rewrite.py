"""The input builder of a plain or JAXBench task, rewritten to take its sizes and seed from a
derived configuration. Pure AST; no jax.

`get_inputs()` with `batch = 4096` and `jax.random.key(0)` becomes
`__derived_builder__(__sizes__, __seed__)` with `batch = __sizes__["batch"]` and
`jax.random.key(__mix_seed__(__seed__, 0))`: distinct fixed keys stay distinct, and every seed
gives fresh inputs. A dict of sizes inside the builder gets its entries the same way
(`config = {'name': 'x', 'batch': __sizes__["batch"]}`), and a literal written where a shape
goes reads its size (`(4096, 8192)` -> `(__sizes__["dim_4096"], __sizes__["dim_8192"])`).
Module-level sizes and dicts (JAXBench's `CONFIG`) are set on the module itself
(kernels/derived_sizes.py), so the reference reads the same sizes as its inputs.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import SupportsInt

from maxkernel_tui.kernels.derive.sites import (
    SiteKind,
    SizeSite,
    function,
    int_of,
    is_key_call,
    literal_names,
)

BUILDER = "__derived_builder__"
SIZES = "__sizes__"
SEED = "__seed__"
MIX = "__mix_seed__"


@dataclass(frozen=True)
class BuilderNames:
    """What the rewritten builder is called and how it names its sizes, seed and key mixer:
    dunder names when it lives hidden in a worker's module, plain ones in a written file."""

    function: str = BUILDER
    sizes: str = SIZES
    seed: str = SEED
    mix: str = MIX


HIDDEN = BuilderNames()


def mix_seed(seed: int, key: SupportsInt) -> int:
    """A fixed key of the task's code, made fresh by the run's seed (a positive 31-bit int)."""
    return (int(seed) * 1_000_003 + int(key)) % (2**31 - 1)


def builder_source(
    module: ast.Module,
    builder: str,
    sites: tuple[SizeSite, ...],
    names: BuilderNames = HIDDEN,
) -> str:
    """The text of `__derived_builder__(__sizes__, __seed__, <builder's own parameters>)`."""
    return ast.unparse(rewritten_builder(module, builder, sites, names))


def rewritten_builder(
    module: ast.Module,
    builder: str,
    sites: tuple[SizeSite, ...],
    names: BuilderNames = HIDDEN,
) -> ast.FunctionDef:
    """The builder reading every size of `sites` that lives in it (locals, its own dicts of
    sizes, literals in shapes) from the sizes argument."""
    original = function(module, builder)
    if original is None:
        raise ValueError(f"no `{builder}` function")
    fn = copy.deepcopy(original)
    fn.name = names.function
    fn.decorator_list = []
    fn.args.posonlyargs = [ast.arg(names.sizes), ast.arg(names.seed), *fn.args.posonlyargs]
    literals = {s.name for s in sites if s.kind == SiteKind.LITERAL}
    # found on the copy before anything moves: the rewrite replaces these very nodes
    literal_ids = {key: name for key, name in literal_names(fn).items() if name in literals}
    local_sizes = {s.name for s in sites if s.kind == SiteKind.LOCAL}
    entries = {
        (s.table, s.key if s.index is None else f"{s.key}[{s.index}]"): s.name
        for s in sites
        if s.kind == SiteKind.ENTRY
    }
    fn.body = [
        _entries(_sized(statement, local_sizes, names.sizes), entries, names.sizes)
        for statement in fn.body
    ]
    sized: ast.FunctionDef = _SizedLiterals(literal_ids, names.sizes).visit(fn)
    seeded: ast.FunctionDef = _SeededKeys(names).visit(sized)
    return ast.fix_missing_locations(seeded)


def _entries(statement: ast.stmt, entries: dict[tuple[str, str], str], sizes: str) -> ast.stmt:
    """`config = {'name': 'x', 'batch': 4}` -> `config = {'name': 'x', 'batch': __sizes__[...]}`"""
    if not (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Dict)):
        return statement
    tables = {t.id for t in statement.targets if isinstance(t, ast.Name)}
    table = statement.value
    table.values = [
        _lookup(sizes, entries[(name, key.value)])
        if isinstance(key, ast.Constant)
        and isinstance(key.value, str)
        and (name := _table_of(tables, entries, key.value))
        else _tuple_entry(value, tables, entries, key, sizes)
        for key, value in zip(table.keys, table.values)
    ]
    return statement


def _tuple_entry(
    value: ast.expr,
    tables: set[str],
    entries: dict[tuple[str, str], str],
    key: ast.expr | None,
    sizes: str,
) -> ast.expr:
    """`'bias_shape': (128, 1, 1)` -> `(__sizes__["bias_shape[0]"], 1, 1)`."""
    if not (
        isinstance(value, ast.Tuple)
        and isinstance(key, ast.Constant)
        and isinstance(key.value, str)
    ):
        return value
    value.elts = [
        _lookup(sizes, entries[(name, element_key)])
        if (name := _table_of(tables, entries, element_key := f"{key.value}[{index}]"))
        else element
        for index, element in enumerate(value.elts)
    ]
    return value


def _table_of(tables: set[str], entries: dict[tuple[str, str], str], key: str) -> str:
    return next((t for t in tables if (t, key) in entries), "")


class _SizedLiterals(ast.NodeTransformer):
    def __init__(self, literal_ids: dict[int, str], sizes: str) -> None:
        self.literal_ids = literal_ids  # node id -> the size it stands for
        self.sizes = sizes

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        name = self.literal_ids.get(id(node))
        if name is not None:
            return ast.copy_location(_lookup(self.sizes, name), node)
        return node


def _sized(statement: ast.stmt, names: set[str], sizes: str) -> ast.stmt:
    """`batch = 4096` -> `batch = __sizes__["batch"]` (also inside `a, b = 8, 128`, and
    `h = w = 64` reads the first name's size: equal in production, so equal when derived)."""
    if not isinstance(statement, ast.Assign):
        return statement
    target, value = statement.targets[0], statement.value
    if isinstance(target, ast.Name) and target.id in names and int_of(value) is not None:
        statement.value = _lookup(sizes, target.id)
    elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
        value.elts = [
            _lookup(sizes, t.id)
            if isinstance(t, ast.Name) and t.id in names and int_of(v) is not None
            else v
            for t, v in zip(target.elts, value.elts)
        ]
    return statement


def _lookup(sizes: str, name: str) -> ast.expr:
    return ast.Subscript(ast.Name(sizes, ast.Load()), ast.Constant(name), ast.Load())


class _SeededKeys(ast.NodeTransformer):
    def __init__(self, names: BuilderNames) -> None:
        self.names = names

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if is_key_call(node):
            seed = ast.Name(self.names.seed, ast.Load())
            node.args[0] = ast.Call(ast.Name(self.names.mix, ast.Load()), [seed, node.args[0]], [])
        return node
