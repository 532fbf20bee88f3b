"""Where a task's input code takes its sizes from, read statically. No jax; nothing runs.

A size is an integer the input builder's shapes are made of, however the code writes it:
- a named integer: a local `batch_size = 4096` in `get_inputs`, or a module-level `HIDDEN = 8192`
  it reads;
- an entry of a dict of sizes read by subscript: a local `config = {'batch': 4, ...}` inside
  `get_inputs` (MaxKernel's production tasks name it `CONFIG` and put strings such as 'name'
  beside the sizes) or a module-level one (JAXBench's `CONFIG`), read as `config['batch']`, also
  where a bare size stands for a shape (`jax.random.normal(k, config['out_features'])`);
- an integer literal where a shape is written (`jax.random.normal(k, (4096, 8192))`,
  `jnp.ones(8192)`, `x.reshape(64, 128)`), and a static arg written as the literal of such a
  size: each is a size of its own, `dim_<value>` for the first of its value in the source and
  `dim_<value>_<n>` for the n-th. The static plan moves sizes of one value together (the code
  gives nothing else to tell them apart, and equal sizes that meet in a contraction must move
  together); tracing the reference tells which of them it really ties (tie_probe.py).
Fixed PRNG keys (`jax.random.key(0)`, `PRNGKey(42)`) are found so the run's seed can replace them.
Integer literals of the rest of the module (the reference's `group_norm(x, 512, ...)`) are
collected as divisors: a size they divide stays divisible by them (derive/rules.py).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast


class SiteKind(StrEnum):
    """Where a size lives in the task's code."""

    LOCAL = "local"  # a named int in the builder
    MODULE = "module"  # a module-level named int
    CONFIG = "config"  # an entry of a module-level dict
    ENTRY = "entry"  # an entry of a dict inside the builder
    LITERAL = "literal"  # a literal in a shape


CONFIG_DICT = "CONFIG"  # JAXBench's module-level dict of dimensions
KEY_FUNCTIONS = frozenset({"key", "PRNGKey", "default_rng", "RandomState"})
LITERAL_FROM = 16  # smaller literals in shapes are structure (1, 3x3 kernels), not sizes
# Calls that take a shape, and where: the positional index of `shape` (or every argument)
_SHAPE_AT = {
    "normal": 1,
    "uniform": 1,
    "bernoulli": 2,
    "truncated_normal": 3,
    "randint": 1,
    "gumbel": 1,
    "rademacher": 1,
    "zeros": 0,
    "ones": 0,
    "empty": 0,
    "full": 0,
    "broadcast_to": 1,
}
_EVERY_ARG = frozenset({"reshape"})


@dataclass(frozen=True)
class SizeSite:
    name: str
    value: int
    kind: SiteKind
    line: int
    table: str = ""  # the dict an entry lives in (config, entry)
    key: str = ""  # its key there
    index: int | None = None  # its place in a tuple entry (`'bias_shape': (128, 1, 1)`)
    entry: tuple[int, ...] = ()  # that tuple as production writes it


# A shape written in the input builder: size names and integer literals, e.g. ("batch", 3, "h").
ShapeTuple = tuple[str | int, ...]


@dataclass(frozen=True)
class Sites:
    sizes: tuple[SizeSite, ...]
    keys: int  # fixed PRNG key calls in the input builder
    notes: tuple[str, ...]  # sizes left at production, with the reason
    shapes: tuple[ShapeTuple, ...] = ()  # the tuples of sizes the builder writes
    divisors: tuple[int, ...] = ()  # integer literals of the code outside the builder


def function(module: ast.Module, name: str) -> ast.FunctionDef | None:
    """The top-level function of that name; the last one when redefined (it is what runs)."""
    found = None
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            found = node
    return found


def literal_name(value: int, occurrence: int = 1) -> str:
    return f"dim_{value}" if occurrence == 1 else f"dim_{value}_{occurrence}"


def literal_names(fn: ast.FunctionDef) -> dict[int, str]:
    """The size each literal of `literal_nodes` stands for, by node id: numbered per value in
    the order of the source, so every process (and the rewritten copy) names them alike."""
    names: dict[int, str] = {}
    seen: dict[int, int] = {}
    for node in sorted(literal_nodes(fn), key=lambda n: (n.lineno, n.col_offset)):
        if id(node) in names:
            continue
        seen[_value(node)] = seen.get(_value(node), 0) + 1
        names[id(node)] = literal_name(_value(node), seen[_value(node)])
    return names


def find_sites(module: ast.Module, builder: str) -> Sites:
    """The sizes and PRNG keys of the input builder function `builder` (get_inputs or
    create_inputs); raises ValueError when there is no such function."""
    fn = function(module, builder)
    if fn is None:
        raise ValueError(f"no `{builder}` function")
    local = _int_assignments(fn.body)
    module_ints = _int_assignments(module.body)
    used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    sizes = [SizeSite(name, value, SiteKind.LOCAL, line) for name, (value, line) in local.items()]
    sizes += [
        SizeSite(name, value, SiteKind.MODULE, line)
        for name, (value, line) in module_ints.items()
        if name in used and name not in local
    ]
    tables = _table_aliases(fn)
    sizes += _table_sizes(module, fn, {s.name for s in sizes}, tables)
    aliases = _size_aliases(fn, sizes, tables)
    literals = literal_names(fn)
    nodes = {id(n): n for n in literal_nodes(fn)}
    sizes += [
        SizeSite(name, _value(nodes[key]), SiteKind.LITERAL, nodes[key].lineno)
        for key, name in literals.items()
    ]
    literal_values = {s.value for s in sizes if s.kind == SiteKind.LITERAL}
    return Sites(
        tuple(sizes),
        _count_keys(fn),
        (),
        _shapes(fn, sizes, literals, aliases),
        # a static arg written as a shape's literal follows that size instead of dividing it
        tuple(sorted(set(code_divisors(module, fn)) | _static_literals(fn) - literal_values)),
    )


@dataclass(frozen=True)
class Aliases:
    """Local names of the builder that stand for a dict of sizes (`C = CONFIG`) or for one
    size (`M, K = CONFIG['M'], CONFIG['K']`; `B = C['batch']`; `B, S = BATCH, SEQ_LEN` of
    module-level sizes), as JAXBench's builders and MaxKernel's 3p write them: `(M, K)` is then
    a shape of the sizes M and K."""

    tables: dict[str, str]  # local name -> the dict it names
    sizes: dict[str, str]  # local name -> the size it holds


def _assigned_pairs(body: list[ast.stmt]) -> Iterator[tuple[ast.Name, ast.expr]]:
    """(name, value) of the body's top-level `a = x` and `a, b = x, y` assignments."""
    for node in body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            pairs = list(zip(target.elts, value.elts))
        else:
            pairs = [(target, value)]
        yield from ((t, v) for t, v in pairs if isinstance(t, ast.Name))


def _table_aliases(fn: ast.FunctionDef) -> dict[str, str]:
    return {
        name.id: value.id for name, value in _assigned_pairs(fn.body) if isinstance(value, ast.Name)
    }


def _size_aliases(fn: ast.FunctionDef, sizes: list[SizeSite], tables: dict[str, str]) -> Aliases:
    plain = Aliases(tables, {})
    held = {
        name.id: size
        for name, value in _assigned_pairs(fn.body)
        if isinstance(value, (ast.Subscript, ast.Name))
        and name.id != getattr(value, "id", None)
        and (size := size_of(value, sizes, plain)) is not None
    }
    return Aliases(tables, held)


def _table_sizes(
    module: ast.Module, fn: ast.FunctionDef, taken: set[str], aliases: dict[str, str]
) -> list[SizeSite]:
    """Integer entries of the dicts of sizes the builder reads by subscript (directly or
    through a local alias): its own local dicts first, then module-level ones (JAXBench's
    CONFIG). A key that another size already names is called `<dict>.<key>`."""
    read = {aliases.get(name, name) for name in _subscripted_tables(fn)}
    found: list[SizeSite] = []
    tables: list[tuple[str, ast.Dict, SiteKind]] = [
        (name, d, SiteKind.ENTRY) for name, d in _dict_assignments(fn.body).items()
    ]
    tables += [(name, d, SiteKind.CONFIG) for name, d in _dict_assignments(module.body).items()]
    seen_tables: set[str] = set()
    for table, literal, kind in tables:
        if table not in read or table in seen_tables:
            continue  # a local dict shadows a module-level one of the same name
        seen_tables.add(table)
        for key, value in zip(literal.keys, literal.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            size = int_of(value)
            if size is not None:
                name = key.value if key.value not in taken else f"{table}.{key.value}"
                taken.add(name)
                found.append(SizeSite(name, size, kind, value.lineno, table, key.value))
            elif isinstance(value, ast.Tuple):
                found += _tuple_entry_sizes(value, table, key.value, kind, taken)
    return found


def _tuple_entry_sizes(
    value: ast.Tuple, table: str, key: str, kind: SiteKind, taken: set[str]
) -> list[SizeSite]:
    """The sizes of a shape kept as a dict entry (`'bias_shape': (128, 1, 1)`): each integer
    of at least LITERAL_FROM is a size of its own, `bias_shape[0]`; the rest is structure."""
    values = [int_of(element) for element in value.elts]
    if None in values:
        return []
    entry = tuple(v for v in values if v is not None)
    found = []
    for index, size in enumerate(entry):
        if size >= LITERAL_FROM:
            name = f"{key}[{index}]" if key not in taken else f"{table}.{key}[{index}]"
            taken.add(name)
            found.append(SizeSite(name, size, kind, value.lineno, table, key, index, entry))
    return found


def entry_value(site: SizeSite, current: Any, size: int) -> Any:
    """A dict entry with `site`'s size set: the size itself, or the tuple entry with its
    element replaced."""
    if site.index is None or not isinstance(current, tuple):
        return size
    return (*current[: site.index], size, *current[site.index + 1 :])


def tuple_entry_shape(
    node: ast.AST, sizes: list[SizeSite] | tuple[SizeSite, ...], aliases: Aliases
) -> ShapeTuple | None:
    """The shape a dict subscript reads when its entry is a tuple of sizes
    (`config['bias_shape']` -> ('bias_shape[0]', 1, 1)); None for anything else."""
    if not (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and isinstance(node.slice, ast.Constant)
    ):
        return None
    table = aliases.tables.get(node.value.id, node.value.id)
    held = {
        s.index: s
        for s in sizes
        if s.table == table and s.key == node.slice.value and s.index is not None
    }
    if not held:
        return None
    entry = next(iter(held.values())).entry
    return tuple(held[i].name if i in held else v for i, v in enumerate(entry))


def _dict_assignments(body: list[ast.stmt]) -> dict[str, ast.Dict]:
    found: dict[str, ast.Dict] = {}
    for node in body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, node.value)
    return found


def _subscripted_tables(fn: ast.FunctionDef) -> set[str]:
    return {
        node.value.id
        for node in ast.walk(fn)
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    }


def size_of(
    node: ast.AST, sizes: list[SizeSite] | tuple[SizeSite, ...], aliases: Aliases
) -> str | None:
    """The size a name or a dict subscript stands for, if any."""
    if isinstance(node, ast.Name):
        for site in sizes:
            if site.kind in (SiteKind.LOCAL, SiteKind.MODULE) and site.name == node.id:
                return site.name
        return aliases.sizes.get(node.id)
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and isinstance(node.slice, ast.Constant)
    ):
        table = aliases.tables.get(node.value.id, node.value.id)
        for site in sizes:
            if site.table == table and site.key == node.slice.value and site.index is None:
                return site.name
    return None


def shape_arguments(fn: ast.FunctionDef) -> Iterator[ast.expr]:
    """The expressions the builder passes where a shape goes, and the tuples it assigns to a
    name ending in `shape`."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in _EVERY_ARG:
                yield from node.args
            elif name in _SHAPE_AT:
                at = _SHAPE_AT[name]
                if len(node.args) > at:
                    yield node.args[at]
            yield from (k.value for k in node.keywords if k.arg == "shape")
        elif (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Tuple)
            and any(isinstance(t, ast.Name) and t.id.endswith("shape") for t in node.targets)
        ):
            yield node.value


def literal_nodes(fn: ast.FunctionDef) -> list[ast.Constant]:
    """Integer literals of at least LITERAL_FROM written where a shape goes, and the static
    args returned as the same literal."""
    found: list[ast.Constant] = []
    for argument in shape_arguments(fn):
        parts = argument.elts if isinstance(argument, (ast.Tuple, ast.List)) else [argument]
        found += [p for p in _int_constants(parts) if _value(p) >= LITERAL_FROM]
    values = {_value(c) for c in found}
    return found + [s for s in _returned_static(fn) if _value(s) in values]


def _returned_static(fn: ast.FunctionDef) -> list[ast.Constant]:
    """The integer literals of the static list in `return [arrays], [static]`."""
    found: list[ast.Constant] = []
    for node in ast.walk(fn):
        returned = node.value if isinstance(node, ast.Return) else None
        if (
            isinstance(returned, ast.Tuple)
            and len(returned.elts) == 2
            and isinstance(returned.elts[1], (ast.List, ast.Tuple))
        ):
            found += _int_constants(returned.elts[1].elts)
    return found


def _static_literals(fn: ast.FunctionDef) -> set[int]:
    """Integer static args the builder returns as literals (`[q, k, v], [24]`, a head count):
    the reference receives them, so they divide like its own literals."""
    return {_value(s) for s in _returned_static(fn) if _value(s) >= 2}


def _shapes(
    fn: ast.FunctionDef, sizes: list[SizeSite], literals: dict[int, str], aliases: Aliases
) -> tuple[ShapeTuple, ...]:
    """Shapes of sizes and integer literals with at least one size in them, where a shape goes
    (directly, or a tuple assigned to a name passed there): other tuples (`M, K, N = ...`, the
    static args returned) are no shapes, and a tuple with anything else in it is not read as
    one; a bare size where a shape goes is a 1-D one. A literal outside a shape argument reads
    as the first size of its value."""
    literal_values = {s.value for s in sizes if s.kind == SiteKind.LITERAL}
    shapes: list[ShapeTuple] = []
    arguments = list(shape_arguments(fn))
    passed = {a.id for a in arguments if isinstance(a, ast.Name)}
    candidates: list[ast.expr] = [a for a in arguments if not isinstance(a, ast.List)]
    candidates += [
        value
        for name, value in _assigned_pairs([n for n in ast.walk(fn) if isinstance(n, ast.stmt)])
        if name.id in passed and isinstance(value, ast.Tuple)
    ]
    candidates = [c for c in candidates if not (isinstance(c, ast.Tuple) and not c.elts)]
    for node in candidates:
        if (whole := tuple_entry_shape(node, sizes, aliases)) is not None:
            shapes.append(whole)
            continue
        shape: list[str | int] = []
        for element in node.elts if isinstance(node, ast.Tuple) else [node]:
            name = size_of(element, sizes, aliases)
            if name is not None:
                shape.append(name)
            elif id(element) in literals:
                shape.append(literals[id(element)])
            elif (value := int_of(element)) is not None:
                shape.append(literal_name(value) if value in literal_values else value)
            else:
                break
        else:
            if any(isinstance(part, str) for part in shape):
                shapes.append(tuple(shape))
    return tuple(shapes)


# Functions of a task file that are not the computation: their literals divide nothing
_NOT_COMPUTATION = frozenset({"benchmark", "get_flops", "main"})


def code_divisors(module: ast.Module, builder: ast.FunctionDef | None) -> tuple[int, ...]:
    """Integer literals (at least 2) in the bodies of the module's functions other than the
    builder (the reference and its helpers), leaving out indices (`x.shape[1]`) and `axis=`
    arguments: group counts, head counts, reshaped sizes."""
    bodies = [
        statement
        for node in module.body
        if isinstance(node, ast.FunctionDef)
        and node is not builder
        and node.name not in _NOT_COMPUTATION
        for statement in node.body
    ]
    skipped: set[int] = set()
    for statement in bodies:
        for node in ast.walk(statement):
            if isinstance(node, ast.Subscript):
                skipped.update(id(n) for n in ast.walk(node.slice))
            elif isinstance(node, ast.keyword) and node.arg in ("axis", "axes", "dimension"):
                skipped.update(id(n) for n in ast.walk(node.value))
    values = {
        value
        for statement in bodies
        for n in ast.walk(statement)
        if (value := int_of(n)) is not None and id(n) not in skipped and value >= 2
    }
    return tuple(sorted(values))


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
            if isinstance(name, ast.Name) and (size := int_of(constant)) is not None:
                found[name.id] = (size, node.lineno)
    return found


def int_of(node: ast.AST) -> int | None:
    """The value of an integer literal (not a bool), None for anything else."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _int_constants(nodes: list[ast.expr]) -> list[ast.Constant]:
    return [n for n in nodes if isinstance(n, ast.Constant) and type(n.value) is int]


def _value(node: ast.Constant) -> int:
    """The value of a node `_int_constants` kept (an int by then)."""
    return cast(int, node.value)


def config_dict(module: ast.Module) -> ast.Dict | None:
    for node in module.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == CONFIG_DICT for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            return node.value
    return None


def is_key_call(node: ast.AST) -> bool:
    """`jax.random.key(...)`, `random.PRNGKey(...)`, `key(...)` after `from jax.random import`."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name in KEY_FUNCTIONS


def _count_keys(fn: ast.FunctionDef) -> int:
    return sum(1 for node in ast.walk(fn) if is_key_call(node))
