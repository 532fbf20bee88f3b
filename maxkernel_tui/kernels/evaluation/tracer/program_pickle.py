"""The bytes of a carried program (evaluation/tracer/transport.py): the pickler that writes
them and the unpickler that reads them. Imports jax.

`Dumper` writes jax's primitives (by name), dtypes, arrays, avals, enumerations and equation
contexts as calls to this module's constructors, and refuses any other function or class that
`Loader` would not hand out. `Loader` reads bytes an attacker chose: pickle's Python unpickler
with its `find_class` limited to `ALLOWED` (plain jax data classes and the constructors below,
each of which builds data from any arguments and runs nothing else), REDUCE/NEWOBJ limited to
what `find_class` handed out, and BUILD/APPEND/SETITEM limited to objects the bytes made: they
cannot alter a primitive, a dtype or an interned type of the judging process.
"""

from __future__ import annotations

import enum
import functools
import io
import math
import pickle
import types
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import ml_dtypes
import numpy as np
from jax._src import core as jax_core
from jax._src import frozen_dict, literals, named_sharding, source_info_util, tree_util
from jax._src import indexing as jax_indexing
from jax._src import linear_util as lu
from jax._src import mesh as mesh_lib
from jax._src.lax import convolution as lax_convolution
from jax._src.lax import lax as lax_lax
from jax._src.lax import slicing as lax_slicing
from jax._src.pallas import core as pallas_core
from jax._src.pallas import primitives as pallas_primitives
from jax._src.pallas.mosaic import core as mosaic_core
from jax._src.state import indexing as state_indexing
from jax._src.state import types as state_types
from jax.sharding import PartitionSpec
from jaxlib._jax import pytree

from maxkernel_tui.kernels.evaluation.protocol import PROGRAM_MAX_BYTES

# A traced kernel program is tens of KiB (measured: 5-22 KiB for the built-in agent's kernels);
# the rest of the cap is room for constants it captures. Loading builds at most some tens of
# bytes of objects per byte read, so the cap also bounds the judge's memory.
MAX_BYTES = PROGRAM_MAX_BYTES
PROTOCOL = 5
NO_SOURCE = source_info_util.new_source_info()

# Primitives never carried: their parameters are Python functions the judge would run, they
# write to the judge's own output, or they pick a branch by platform (lax.platform_dependent:
# interpret mode on the CPU would take another branch than the TPU, so nothing would judge it).
REFUSED = {
    "pure_callback": "a host callback (jax.pure_callback) runs Python the judge would execute",
    "io_callback": "a host callback (io_callback) runs Python the judge would execute",
    "debug_callback": "a host callback (jax.debug.callback) runs Python the judge would execute",
    "debug_print": "jax.debug.print / pl.debug_print writes to the judging process's output",
    "custom_lin": "a linearized custom derivative holds Python functions",
    "custom_vmap_call": "a custom_vmap rule holds Python functions",
    "custom_partitioning": "custom_partitioning holds Python functions",
    "custom_transpose_call": "a custom transpose rule holds Python functions",
    "custom_jvp_call": "an un-inlined custom_jvp holds Python functions",
    "custom_vjp_call": "an un-inlined custom_vjp holds Python functions",
    "remat2": "an un-inlined jax.checkpoint holds a Python policy",
    "platform_index": "a branch per platform (lax.platform_dependent): interpret mode on the CPU "
    "would not judge what the TPU runs",
}


class NotTransportable(Exception):
    """A program that cannot be carried, or bytes that are not a carried program; the message
    says why."""


def is_function(value: Any) -> bool:
    if isinstance(value, (type, jax_core.Primitive)):
        return False
    return isinstance(
        value,
        (
            types.FunctionType,
            types.BuiltinFunctionType,
            types.MethodType,
            functools.partial,
            lu.WrappedFun,
        ),
    )


def describe(value: Any) -> str:
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return f"{type(value).__name__} {name}"


# --- the bytes -----------------------------------------------------------------------------


class Dumper(pickle.Pickler):
    """Pickles a rewritten program; primitives, arrays and dtypes as plain data."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=PROTOCOL)

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, jax_core.Primitive):
            if _primitives().get(obj.name) is not obj:
                raise NotTransportable(f"primitive {obj.name!r} is not one the judge knows")
            return _primitive, (obj.name,)
        if isinstance(obj, jax.Array):
            return _jax_array, _array_parts(np.asarray(obj))
        if type(obj) is np.ndarray:
            return _numpy_array, _array_parts(obj)
        if isinstance(obj, np.generic):
            return _numpy_scalar, _array_parts(np.asarray(obj))
        if isinstance(obj, np.dtype):
            return _dtype, (_dtype_name(obj),)
        if type(obj) is jax_core.JaxprEqnContext:
            return _eqn_context, _context_parts(obj)
        if type(obj) is jax_core.ShapedArray:
            return _shaped_array, _aval_parts(obj)
        if type(obj) in literals.typed_scalar_types:
            return _typed_scalar, _typed_scalar_parts(obj)
        if type(obj) is literals.TypedNdArray:
            return _typed_array, (*_array_parts(np.asarray(obj)), bool(obj.weak_type))
        if isinstance(obj, (mesh_lib.Mesh, mesh_lib.AbstractMesh)):
            if obj.shape_tuple:
                raise NotTransportable("the program names a device mesh")
            return _empty_mesh, (isinstance(obj, mesh_lib.AbstractMesh),)
        if obj is named_sharding.UNSPECIFIED:
            return _unspecified, ()
        if type(obj) is named_sharding.NamedSharding:
            return _unsharded, _unsharded_parts(obj)
        if obj is pallas_core.dynamic_grid_dim:
            return _dynamic_grid_dim, ()
        if type(obj) is frozen_dict.FrozenDict:
            return _frozen_dict, (tuple(obj.items()),)
        if isinstance(obj, pallas_core.AbstractSemaphoreTy):
            if _SEMAPHORES.get(obj.name) is not type(obj):
                raise NotTransportable(f"a semaphore type {obj!r}")
            return _semaphore, (obj.name,)
        if type(obj) is source_info_util.SourceInfo:
            return _no_source, ()  # tracebacks and name stacks: for error messages only
        if isinstance(obj, enum.Enum):
            if type(obj) not in _ENUM_TYPES:
                raise NotTransportable(f"the program holds {obj!r}, not carried data")
            return _enum, (_key_name(type(obj)), obj.name)
        if isinstance(obj, pytree.PyTreeRegistry) and not any(
            obj is found for found in _FOUND.values()
        ):
            raise NotTransportable("a pytree in a registry the judge does not have")
        named = (getattr(obj, "__module__", ""), getattr(obj, "__qualname__", ""))
        # pickled by reference: only what the judge's loader hands out
        if (isinstance(obj, type) or is_function(obj)) and _FOUND.get(named) is not obj:
            raise NotTransportable(f"the program holds {describe(obj)}, not carried data")
        return NotImplemented


def _array_parts(array: np.ndarray) -> tuple[str, tuple[int, ...], bytes]:
    return _dtype_name(array.dtype), tuple(array.shape), np.ascontiguousarray(array).tobytes()


def _dtype_name(dtype: np.dtype) -> str:
    name = np.dtype(dtype).name
    if name not in _DTYPES:
        raise NotTransportable(f"an array of type {name}")
    return name


def _aval_parts(aval: Any) -> tuple[Any, ...]:
    default = jax_core.ShapedArray(aval.shape, aval.dtype, aval.weak_type)
    if aval.sharding != default.sharding or aval.manual_axis_type is not default.manual_axis_type:
        raise NotTransportable(f"a value with a sharding ({aval.str_short()})")
    return tuple(aval.shape), aval.dtype, bool(aval.weak_type), aval.memory_space


def _typed_scalar_parts(scalar: Any) -> tuple[str, Any, str]:
    plain = next(t for t in (bool, int, float, complex) if isinstance(scalar, t))
    return type(scalar).__name__, plain(scalar), _dtype_name(scalar.dtype)


def _context_parts(ctx: Any) -> tuple[Any, ...]:
    if ctx.cur_abstract_mesh.shape_tuple:
        raise NotTransportable("an equation traced under a device mesh")
    metadata = None if ctx.xla_metadata is None else tuple(sorted(ctx.xla_metadata.items()))
    return (ctx.compute_type, ctx.threefry_partitionable, metadata)


# Array element types a program may carry: numbers only (never Python objects).
_DTYPES: dict[str, np.dtype] = {
    np.dtype(t).name: np.dtype(t)
    for t in (
        np.bool_,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.float16,
        np.float32,
        np.float64,
        np.complex64,
        np.complex128,
        ml_dtypes.bfloat16,
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e5m2,
        ml_dtypes.float8_e4m3b11fnuz,
        ml_dtypes.int4,
        ml_dtypes.uint4,
    )
}


# --- the loader's constructors (each safe on any arguments) ----------------------------------


def _primitive(name: Any) -> jax_core.Primitive:
    primitive = _primitives().get(name) if isinstance(name, str) else None
    if primitive is None or name in REFUSED:
        raise NotTransportable(f"primitive {name!r} is not one a carried program may use")
    return primitive


def _dtype(name: Any) -> np.dtype:
    if not isinstance(name, str) or name not in _DTYPES:
        raise NotTransportable(f"element type {name!r} is not one a carried program may use")
    return _DTYPES[name]


def _numpy_array(name: Any, shape: Any, raw: Any) -> np.ndarray:
    dtype = _dtype(name)
    if not (isinstance(shape, tuple) and all(type(d) is int and d >= 0 for d in shape)):
        raise NotTransportable(f"array shape {shape!r}")
    if not isinstance(raw, bytes) or len(raw) != math.prod(shape) * dtype.itemsize:
        raise NotTransportable("array bytes that do not match its shape")
    return np.frombuffer(raw, dtype).reshape(shape).copy()


def _numpy_scalar(name: Any, shape: Any, raw: Any) -> np.generic:
    if shape != ():
        raise NotTransportable(f"a scalar of shape {shape!r}")
    scalar: np.generic = _numpy_array(name, shape, raw).reshape(-1)[0]
    return scalar


def _jax_array(name: Any, shape: Any, raw: Any) -> jax.Array:
    return jax.numpy.asarray(_numpy_array(name, shape, raw))


def _eqn_context(compute_type: Any, threefry: Any, metadata: Any) -> Any:
    if not (compute_type is None or isinstance(compute_type, str)) or type(threefry) is not bool:
        raise NotTransportable("a malformed equation context")
    if metadata is not None and not (
        isinstance(metadata, tuple)
        and all(
            isinstance(p, tuple)
            and len(p) == 2
            and isinstance(p[0], str)
            and type(p[1]) in (str, int, float, bool)
            for p in metadata
        )
    ):
        raise NotTransportable("malformed XLA metadata")
    base = jax_core.current_jaxpr_eqn_context()
    return jax_core.JaxprEqnContext._create(
        compute_type, threefry, base.cur_abstract_mesh, base.remove_size_one_mesh_axis, metadata
    )


def _shaped_array(shape: Any, dtype: Any, weak_type: Any, memory_space: Any) -> Any:
    if not (isinstance(shape, tuple) and all(type(d) is int and d >= 0 for d in shape)):
        raise NotTransportable(f"a value of shape {shape!r}")
    if not isinstance(dtype, (np.dtype, pallas_core.AbstractSemaphoreTy)):
        raise NotTransportable(f"a value of element type {dtype!r}")
    if type(weak_type) is not bool:
        raise NotTransportable("a malformed value type")
    if not isinstance(memory_space, jax_core.MemorySpace):
        raise NotTransportable(f"memory space {memory_space!r}")
    return jax_core.ShapedArray(shape, dtype, weak_type, memory_space=memory_space)


_TYPED_SCALARS = {t.__name__: t for t in literals.typed_scalar_types}


def _typed_scalar(kind: Any, value: Any, dtype: Any) -> Any:
    scalar_type = _TYPED_SCALARS.get(kind) if isinstance(kind, str) else None
    if scalar_type is None or type(value) not in (int, float, complex, bool):
        raise NotTransportable(f"a literal {kind!r}")
    return scalar_type(value, _dtype(dtype))


def _typed_array(name: Any, shape: Any, raw: Any, weak_type: Any) -> Any:
    array = _numpy_array(name, shape, raw)
    aval = jax_core.ShapedArray(array.shape, array.dtype, weak_type=bool(weak_type))
    return literals.TypedNdArray(array, aval)


def _empty_mesh(abstract: Any) -> Any:
    return mesh_lib.empty_abstract_mesh if abstract is True else mesh_lib.empty_concrete_mesh


def _unspecified() -> Any:
    return named_sharding.UNSPECIFIED


def _unsharded_parts(sharding: Any) -> tuple[bool, int]:
    """A NamedSharding that shards nothing (an empty mesh, every dimension unnamed), as a
    `convert_element_type` inside a jax.vjp of jnp carries one: its mesh kind and rank."""
    mesh = sharding.mesh
    if mesh.shape_tuple or any(part is not None for part in sharding.spec):
        raise NotTransportable("the program shards a value over a device mesh")
    if sharding.memory_kind is not None:
        raise NotTransportable(f"a sharding in memory {sharding.memory_kind!r}")
    return isinstance(mesh, mesh_lib.AbstractMesh), len(sharding.spec)


def _unsharded(abstract: Any, rank: Any) -> Any:
    return named_sharding.NamedSharding(_empty_mesh(abstract), PartitionSpec(*[None] * int(rank)))


def _dynamic_grid_dim() -> Any:
    return pallas_core.dynamic_grid_dim


def _frozen_dict(items: Any) -> Any:
    if not (isinstance(items, tuple) and all(isinstance(i, tuple) and len(i) == 2 for i in items)):
        raise NotTransportable("a malformed frozen dict")
    return frozen_dict.FrozenDict(dict(items))


# Semaphore element types (Pallas's extended dtypes), by name.
_SEMAPHORES: dict[str, type] = {
    t.name: t
    for t in (pallas_core.Semaphore, pallas_core.BarrierSemaphore, mosaic_core.DMASemaphore)
}


def _semaphore(name: Any) -> Any:
    semaphore_type = _SEMAPHORES.get(name) if isinstance(name, str) else None
    if semaphore_type is None:
        raise NotTransportable(f"semaphore type {name!r}")
    return semaphore_type()


@functools.cache
def _primitives() -> dict[str, jax_core.Primitive]:
    """Every primitive jax registers a lowering or a derivative for (Pallas's and Mosaic's
    included), by name; a name two primitives share is left out (it could not be looked up)."""
    from jax._src.interpreters import ad, mlir
    from jax._src.pallas.mosaic import lowering as mosaic_lowering
    from jax.experimental import pallas  # noqa: F401  (registers Pallas's primitives)
    from jax.experimental.pallas import tpu  # noqa: F401  (and the TPU ones)

    found: set[jax_core.Primitive] = set(mlir._lowerings) | set(ad.primitive_jvps)
    tables: list[Any] = [
        *mlir._platform_specific_lowerings.values(),
        *mosaic_lowering.lowering_rules.values(),
    ]
    for table in tables:
        found |= set(table)
    by_name: dict[str, list[jax_core.Primitive]] = {}
    for primitive in found:
        by_name.setdefault(primitive.name, []).append(primitive)
    return {name: ps[0] for name, ps in by_name.items() if len(ps) == 1}


def _key_name(value: Any) -> str:
    return f"{value.__module__}.{value.__qualname__}"


def _key(value: Any) -> tuple[str, str]:
    return value.__module__, value.__qualname__


def _enum(key: Any, member: Any) -> enum.Enum:
    enum_type = _ENUMS.get(key) if isinstance(key, str) else None
    if enum_type is None or not isinstance(member, str) or member not in enum_type.__members__:
        raise NotTransportable(f"enumeration {key!r}.{member!r}")
    return enum_type[member]


def _no_source() -> Any:
    return NO_SOURCE


# Value enumerations a program's parameters hold (memory spaces, dimension semantics,
# precisions...), carried as (class, member name).
_ENUM_TYPES: tuple[type[enum.Enum], ...] = (
    jax_core.MemorySpace,
    lax_lax.RoundingMethod,
    lax_lax.AccuracyMode,
    lax_lax.Precision,
    lax_lax.DotAlgorithmPreset,
    lax_lax.RaggedDotMode,
    lax_lax.RandomAlgorithm,
    lax_lax.PaddingType,
    lax_slicing.GatherScatterMode,
    pallas_core.RevisitMode,
    pallas_core.MemorySpace,
    mosaic_core.CoreType,
    mosaic_core.GridDimensionSemantics,
    mosaic_core.SideEffectType,
    mosaic_core.MemorySpace,
    mosaic_core.SemaphoreType,
    pallas_primitives.DeviceIdType,
)
_ENUMS: dict[str, type[enum.Enum]] = {_key_name(t): t for t in _ENUM_TYPES}

# Plain data classes: built by `cls.__new__(cls)` (object's, a tuple's for the named tuples,
# nanobind's for PyTreeDef) and then given their attributes (a slotted frozen dataclass through
# dataclasses' own __setstate__, a PyTreeDef through its C++ one, which validates the nodes);
# no class here runs code of its own on the way, and called with any arguments (REDUCE) their
# constructors only store and validate them.
_DATA_TYPES: tuple[type, ...] = (
    jax_core.ClosedJaxpr,
    jax_core.Jaxpr,
    jax_core.JaxprEqn,
    jax_core.Var,
    jax_core.DropVar,
    jax_core.Literal,
    lu.DebugInfo,
    lax_lax.DotAlgorithm,
    lax_lax.RaggedDotDimensionNumbers,
    lax_slicing.GatherDimensionNumbers,
    lax_slicing.ScatterDimensionNumbers,
    lax_convolution.ConvDimensionNumbers,
    pallas_core.Blocked,
    pallas_core.Squeezed,
    pallas_core.Element,
    pallas_core.BoundedSlice,
    pallas_core.Buffered,
    pallas_core.BlockMapping,
    pallas_core.GridMapping,
    pallas_core.CostEstimate,
    mosaic_core.CompilerParams,
    mosaic_core.AbstractSemaphore,
    state_types.AbstractRef,
    state_types.ReadEffect,
    state_types.WriteEffect,
    state_types.AccumEffect,
    state_types.RefIndexer,
    state_types.BitcastTransform,
    state_types.ReshapeTransform,
    state_types.TransposeTransform,
    state_types.TransformedRef,
    state_indexing.NDIndexer,
    jax_indexing.Slice,
    pytree.PyTreeDef,
)
_CONSTRUCTORS: tuple[Callable[..., Any], ...] = (
    _primitive,
    _dtype,
    _numpy_array,
    _numpy_scalar,
    _jax_array,
    _eqn_context,
    _shaped_array,
    _typed_scalar,
    _typed_array,
    _empty_mesh,
    _unspecified,
    _unsharded,
    _dynamic_grid_dim,
    _frozen_dict,
    _semaphore,
    _enum,
    _no_source,
)


# The (module, name) pairs `Loader.find_class` hands out: the data classes, this module's
# constructors and jax's pytree registries (a PyTreeDef's state names the one it was made in;
# a registry is not callable, and BUILD is refused on it).
_FOUND: dict[tuple[str, str], Any] = {
    **{_key(t): t for t in (*_DATA_TYPES, *_CONSTRUCTORS)},
    **{
        ("jax._src.tree_util", name): getattr(tree_util, name)
        for name in ("default_registry", "none_leaf_registry", "tracing_registry")
    },
}
ALLOWED: frozenset[tuple[str, str]] = frozenset(_FOUND)


# pickle's Python unpickler: its opcodes are methods, which Loader can restrict one by one (the
# C one's cannot be); typeshed does not describe its internals.
_PythonUnpickler: Any = pickle._Unpickler


class Loader(_PythonUnpickler):  # type: ignore[misc]  # an untyped base: see above
    """pickle's own (Python) unpickler, made to build only allowed objects:

    - globals come from `_FOUND` only (never imported by name);
    - REDUCE and NEWOBJ call only what a global handed out (not an object the bytes built);
    - BUILD sets attributes only on objects NEWOBJ made in this load, and APPEND, SETITEM and
      ADDITEMS fill only plain lists, dicts and sets: the bytes cannot alter a shared object
      (a primitive, a dtype, an interned type) of the judging process.
    """

    dispatch: ClassVar[dict[int, Callable[..., Any]]] = dict(_PythonUnpickler.dispatch)

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file)
        self._handed_out: set[int] = set()
        self._made: list[Any] = []  # kept alive, so that their ids stay theirs
        self._made_ids: set[int] = set()

    def find_class(self, module: str, name: str) -> Any:
        found = _FOUND.get((module, name))
        if found is None:
            raise NotTransportable(f"the bytes name {module}.{name}, which a program may not")
        self._handed_out.add(id(found))
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise NotTransportable("the bytes hold a persistent reference")

    def _callable(self, value: Any, opcode: str) -> None:
        if id(value) not in self._handed_out:
            raise NotTransportable(f"{opcode} of something no allowed global named")

    def _load_reduce(self) -> None:
        self._callable(self.stack[-2], "REDUCE")
        _PythonUnpickler.load_reduce(self)

    def _load_newobj(self) -> None:
        self._callable(self.stack[-2], "NEWOBJ")
        if self.stack[-2] not in _DATA_TYPES:
            raise NotTransportable("NEWOBJ of a constructor")
        _PythonUnpickler.load_newobj(self)
        self._made.append(self.stack[-1])
        self._made_ids.add(id(self.stack[-1]))

    def _load_build(self) -> None:
        if id(self.stack[-2]) not in self._made_ids:
            raise NotTransportable("BUILD of an object the bytes did not make")
        _PythonUnpickler.load_build(self)

    def _into(self, kind: type, depth: int, opcode: str) -> None:
        target = self.stack[-depth] if depth else self.metastack[-1][-1]
        if type(target) is not kind:
            raise NotTransportable(f"{opcode} into a {type(target).__name__}")

    def _load_append(self) -> None:
        self._into(list, 2, "APPEND")
        _PythonUnpickler.load_append(self)

    def _load_appends(self) -> None:
        self._into(list, 0, "APPENDS")
        _PythonUnpickler.load_appends(self)

    def _load_setitem(self) -> None:
        self._into(dict, 3, "SETITEM")
        _PythonUnpickler.load_setitem(self)

    def _load_setitems(self) -> None:
        self._into(dict, 0, "SETITEMS")
        _PythonUnpickler.load_setitems(self)

    def _load_additems(self) -> None:
        self._into(set, 0, "ADDITEMS")
        _PythonUnpickler.load_additems(self)

    def _refuse(self) -> None:
        raise NotTransportable("an opcode carried programs never use")

    for _opcode, _method in (
        (pickle.REDUCE, _load_reduce),
        (pickle.NEWOBJ, _load_newobj),
        (pickle.BUILD, _load_build),
        (pickle.APPEND, _load_append),
        (pickle.APPENDS, _load_appends),
        (pickle.SETITEM, _load_setitem),
        (pickle.SETITEMS, _load_setitems),
        (pickle.ADDITEMS, _load_additems),
        (pickle.NEWOBJ_EX, _refuse),
        (pickle.OBJ, _refuse),
        (pickle.INST, _refuse),
        (pickle.EXT1, _refuse),
        (pickle.EXT2, _refuse),
        (pickle.EXT4, _refuse),
    ):
        dispatch[_opcode[0]] = _method
    del _opcode, _method
