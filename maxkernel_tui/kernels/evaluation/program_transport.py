"""A traced program carried as bytes from the process that traced it to one that judges it.
Imports jax.

Trust model: the process that imports a candidate kernel is the candidate's: its module can
patch anything in it, so nothing judged there can be believed. That process only traces and
calls `dump_program`; a judge that never imports the candidate calls `load_program` on the
bytes and runs every check on what it gets. Whatever the candidate does, what it sends is
simply the program that is judged.

`dump_program` (untrusted side; it protects nothing, it only makes an honest program
transportable) rewrites the program so that it holds no Python callables: `custom_jvp_call`,
`custom_vjp_call` and `checkpoint` are inlined (their primal body replaces them, everywhere,
Pallas kernel bodies and index maps included); host callbacks and `debug_print` are refused;
source tracebacks are dropped (a kernel's name, which the analyses report, is kept). It then
pickles the result with jax's primitives, dtypes and arrays written as plain data.

`load_program` (trusted side, on bytes an attacker chose) unpickles with `_Loader`, whose
`find_class` hands out only the (module, name) pairs of `ALLOWED`: jax's jaxpr, aval and
Pallas data classes and this module's own constructors. Each entry, called with any arguments
pickle can build (which are themselves only allowed objects and plain data), constructs data
and runs nothing else; primitives come from a table of those jax registers, looked up by name
(never built from the bytes), without the refused ones. A payload over `MAX_BYTES` is not read.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import io
import math
import pickle
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import jax
import ml_dtypes
import numpy as np
from jax._src import core as jax_core
from jax._src import indexing as jax_indexing
from jax._src import linear_util as lu
from jax._src import literals, named_sharding, source_info_util, tree_util
from jax._src import mesh as mesh_lib
from jax._src.lax import convolution as lax_convolution
from jax._src.lax import lax as lax_lax
from jax._src.lax import slicing as lax_slicing
from jax._src.pallas import core as pallas_core
from jax._src.pallas import primitives as pallas_primitives
from jax._src.pallas.mosaic import core as mosaic_core
from jax._src.state import indexing as state_indexing
from jax._src.state import types as state_types
from jax.extend import core
from jaxlib._jax import pytree

# A traced kernel program is kilobytes to a few MiB (its constants); far more is not a program.
MAX_BYTES = 256 * 2**20
_PROTOCOL = 5

# Primitives replaced by their primal body at dump: each holds Python functions (derivative
# rules, a rematerialisation policy) that no other process could receive, and none changes the
# primal computation a judge runs.
_INLINED = {"custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "checkpoint": "jaxpr"}
# Primitives never carried: their parameters are Python functions the judge would run, or they
# write to the judge's own output.
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
    "checkpoint": "an un-inlined checkpoint holds a Python policy",
}


class NotTransportable(Exception):
    """A program that cannot be carried, or bytes that are not a carried program; the message
    says why."""


def dump_program(closed_jaxpr: core.ClosedJaxpr) -> bytes:
    """The program as bytes `load_program` rebuilds exactly (run where the program was traced)."""
    rewritten = _Rewriter(_as_traced_for_tpu).closed(closed_jaxpr)
    buffer = io.BytesIO()
    try:
        _Dumper(buffer).dump(rewritten)
    except NotTransportable:
        raise
    except (pickle.PicklingError, TypeError, AttributeError) as error:
        raise NotTransportable(
            f"the program holds something that cannot be carried: {error}"
        ) from None
    data = buffer.getvalue()
    if len(data) > MAX_BYTES:
        raise NotTransportable(f"the program is {len(data)} bytes, over {MAX_BYTES}")
    return data


def load_program(data: bytes, *, max_bytes: int = MAX_BYTES) -> core.ClosedJaxpr:
    """The program `dump_program` wrote; constructs allowed data types only, runs nothing."""
    if len(data) > max_bytes:
        raise NotTransportable(f"{len(data)} bytes, over the {max_bytes} a program may take")
    try:
        program = _Loader(io.BytesIO(data)).load()
    except NotTransportable:
        raise
    except Exception as error:  # malformed bytes: whatever pickle or a constructor raised
        raise NotTransportable(f"not a carried program: {_first_line(error)}") from None
    if not isinstance(program, core.ClosedJaxpr):
        raise NotTransportable(f"not a carried program: a {type(program).__name__}")
    _check_types(program)
    for eqn in _equations(program):
        if eqn.primitive.name == "pallas_call" and (
            eqn.params.get("interpret") is not False or eqn.params.get("debug") is not False
        ):
            # the judge chooses how a kernel is interpreted (interpreted()); on a TPU it runs
            # Mosaic, and a debug kernel would print into the judge's output
            raise NotTransportable("a pallas_call carried with interpret or debug set")
    return program


def interpreted(program: core.ClosedJaxpr, params: Any) -> core.ClosedJaxpr:
    """The program with every pallas_call run in interpret mode with `params` (e.g.
    `pltpu.InterpretParams`): what `force_tpu_interpret_mode` does for a program traced under
    it, for a program that was traced elsewhere."""
    return _Rewriter(lambda kernel: dict(kernel, interpret=params)).closed(program)


def _as_traced_for_tpu(kernel: dict[str, Any]) -> dict[str, Any]:
    """A kernel's parameters as a plain TPU trace has them: interpret mode is the judge's
    choice, and the debug flag prints from the process that lowers the kernel."""
    return dict(kernel, interpret=False, debug=False)


def _check_types(program: core.ClosedJaxpr) -> None:
    """Every jaxpr of the program (kernel bodies and index maps too, which jax's own check
    does not enter) types as its operations say: the analyses read shapes from the variables'
    types, and forged ones (a matmul's operand recorded smaller than it is) would mislead them."""
    for jaxpr in _jaxprs(program):
        try:
            jax_core.check_jaxpr(jaxpr)
        except Exception as error:
            raise NotTransportable(f"the program is not well typed: {_first_line(error)}") from None


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:300] if lines else ''}"


def _equations(program: core.ClosedJaxpr) -> Iterator[core.JaxprEqn]:
    for jaxpr in _jaxprs(program):
        yield from jaxpr.eqns


def _jaxprs(value: Any) -> Iterator[core.Jaxpr]:
    """Every jaxpr a program holds, in every parameter (Pallas kernel bodies and index maps
    included)."""
    if isinstance(value, core.ClosedJaxpr):
        value = value.jaxpr
    if isinstance(value, core.Jaxpr):
        yield value
        for eqn in value.eqns:
            yield from _jaxprs(eqn.params)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _jaxprs(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _jaxprs(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _jaxprs(getattr(value, field.name))


# --- the rewrite (untrusted side) -------------------------------------------------------------


_NO_SOURCE = source_info_util.new_source_info()


class _Rewriter:
    """A copy of a program without custom derivatives, callbacks or source tracebacks. A jaxpr
    shared by several equations is rewritten once and stays shared."""

    def __init__(self, kernel_params: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self._done: dict[int, Any] = {}
        self._kernel_params = kernel_params

    def closed(self, closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
        key = id(closed)
        if key not in self._done:
            self._done[key] = (closed, core.ClosedJaxpr(self.jaxpr(closed.jaxpr), closed.consts))
        return self._done[key][1]

    def jaxpr(self, jaxpr: core.Jaxpr) -> core.Jaxpr:
        key = id(jaxpr)
        if key not in self._done:
            self._done[key] = (jaxpr, self._rewrite(jaxpr))
        return self._done[key][1]

    def _rewrite(self, jaxpr: core.Jaxpr) -> core.Jaxpr:
        renamed: dict[core.Var, Any] = {}  # outputs of inlined calls: the atoms that replace them

        def atom(a: Any) -> Any:
            return renamed.get(a, a) if isinstance(a, core.Var) else a

        eqns: list[core.JaxprEqn] = []
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            args = [atom(a) for a in eqn.invars]
            if name in _INLINED:
                body = eqn.params[_INLINED[name]]
                if isinstance(body, core.Jaxpr):
                    body = core.ClosedJaxpr(body, ())
                outs = _inline(self.closed(body), args, eqns)
                for var, out in zip(eqn.outvars, outs, strict=True):
                    renamed[var] = out
                continue
            if name in REFUSED:
                raise NotTransportable(f"{name}: {REFUSED[name]}")
            params = {k: self._value(v, f"{name}.{k}") for k, v in eqn.params.items()}
            if name == "pallas_call":
                params = self._kernel_params(params)
            eqns.append(eqn.replace(invars=args, params=params, source_info=_NO_SOURCE))
        return jaxpr.replace(
            eqns=eqns,
            outvars=[atom(a) for a in jaxpr.outvars],
            debug_info=_plain_debug_info(jaxpr.debug_info),
        )

    def _value(self, value: Any, where: str) -> Any:
        """A parameter with its jaxprs rewritten; a Python function in it is refused."""
        if isinstance(value, core.ClosedJaxpr):
            return self.closed(value)
        if isinstance(value, core.Jaxpr):
            return self.jaxpr(value)
        if isinstance(value, (list, tuple)):
            items = [self._value(v, where) for v in value]
            if all(a is b for a, b in zip(items, value, strict=True)):
                return value
            return type(value)(items) if not hasattr(value, "_fields") else type(value)(*items)
        if isinstance(value, dict):
            return {k: self._value(v, f"{where}[{k!r}]") for k, v in value.items()}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._fields(value, where)
        if _is_function(value):
            raise NotTransportable(f"{where} holds a Python function ({_describe(value)})")
        return value

    def _fields(self, value: Any, where: str) -> Any:
        changed = {}
        for field in dataclasses.fields(value):
            old = getattr(value, field.name)
            new = self._value(old, f"{where}.{field.name}")
            if new is not old:
                changed[field.name] = new
        if not changed:
            return value
        fresh = copy.copy(value)  # not dataclasses.replace: __post_init__ is not run again
        for name, new in changed.items():
            object.__setattr__(fresh, name, new)
        return fresh


def _inline(body: core.ClosedJaxpr, args: Sequence[Any], eqns: list[core.JaxprEqn]) -> list[Any]:
    """Append `body`'s equations applied to `args` (fresh variables: the same body may be
    inlined twice); its outputs as atoms of the caller."""
    inner = body.jaxpr
    env: dict[core.Var, Any] = dict(zip(inner.invars, args, strict=True))
    for var, const in zip(inner.constvars, body.consts, strict=True):
        if not core.is_literalable(const):
            raise NotTransportable("a custom derivative closes over an array constant")
        env[var] = core.Literal(const, var.aval)

    def atom(a: Any) -> Any:
        return env[a] if isinstance(a, core.Var) else a

    for eqn in inner.eqns:
        outvars = []
        for var in eqn.outvars:
            fresh = (
                jax_core.DropVar(var.aval)
                if isinstance(var, jax_core.DropVar)
                else core.Var(var.aval)
            )
            env[var] = fresh
            outvars.append(fresh)
        eqns.append(eqn.replace(invars=[atom(a) for a in eqn.invars], outvars=outvars))
    return [atom(a) for a in inner.outvars]


def _plain_debug_info(info: Any) -> Any:
    """Debug info as plain strings: the result paths computed (they may be a thunk)."""
    if info is None:
        return None
    paths = info.result_paths
    if callable(paths):
        info = info.resolve_result_paths()
        paths = info.result_paths
    if not isinstance(paths, tuple):
        paths = None
    return lu.DebugInfo(
        str(info.traced_for),
        None if info.func_src_info is None else str(info.func_src_info),
        None if info.arg_names is None else tuple(info.arg_names),
        paths,
    )


def _is_function(value: Any) -> bool:
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


def _describe(value: Any) -> str:
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return f"{type(value).__name__} {name}"


# --- the bytes -----------------------------------------------------------------------------


class _Dumper(pickle.Pickler):
    """Pickles a rewritten program; primitives, arrays and dtypes as plain data."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=_PROTOCOL)

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
        if type(obj) is source_info_util.SourceInfo:
            return _no_source, ()  # tracebacks and name stacks: for error messages only
        if isinstance(obj, enum.Enum):
            if type(obj) not in _ENUM_TYPES:
                raise NotTransportable(f"the program holds {obj!r}, not carried data")
            return _enum, (_key_name(type(obj)), obj.name)
        named = (getattr(obj, "__module__", ""), getattr(obj, "__qualname__", ""))
        # pickled by reference: only what the judge's loader hands out
        if (isinstance(obj, type) or _is_function(obj)) and _FOUND.get(named) is not obj:
            raise NotTransportable(f"the program holds {_describe(obj)}, not carried data")
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
    return _numpy_array(name, shape, raw)[()]


def _jax_array(name: Any, shape: Any, raw: Any) -> jax.Array:
    return jax.numpy.asarray(_numpy_array(name, shape, raw))


def _eqn_context(compute_type: Any, threefry: Any, metadata: Any) -> Any:
    if not (compute_type is None or isinstance(compute_type, str)) or type(threefry) is not bool:
        raise NotTransportable("a malformed equation context")
    if metadata is not None and not (
        isinstance(metadata, tuple)
        and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in metadata)
    ):
        raise NotTransportable("malformed XLA metadata")
    base = jax_core.current_jaxpr_eqn_context()
    return jax_core.JaxprEqnContext._create(
        compute_type, threefry, base.cur_abstract_mesh, base.remove_size_one_mesh_axis, metadata
    )


def _shaped_array(shape: Any, dtype: Any, weak_type: Any, memory_space: Any) -> Any:
    if not (isinstance(shape, tuple) and all(type(d) is int and d >= 0 for d in shape)):
        raise NotTransportable(f"a value of shape {shape!r}")
    if not isinstance(dtype, np.dtype) or type(weak_type) is not bool:
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


@functools.cache
def _primitives() -> dict[str, jax_core.Primitive]:
    """Every primitive jax registers a lowering or a derivative for (Pallas's and Mosaic's
    included), by name; a name two primitives share is left out (it could not be looked up)."""
    from jax._src.interpreters import ad, mlir
    from jax._src.pallas.mosaic import lowering as mosaic_lowering
    from jax.experimental import pallas  # noqa: F401  (registers Pallas's primitives)
    from jax.experimental.pallas import tpu  # noqa: F401  (and the TPU ones)

    found: set[jax_core.Primitive] = set(mlir._lowerings) | set(ad.primitive_jvps)
    for table in mlir._platform_specific_lowerings.values():
        found |= set(table)
    for table in mosaic_lowering.lowering_rules.values():
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
    return _NO_SOURCE


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

# Plain data classes: built by `cls.__new__(cls)` (object's, or a tuple's for the named
# tuples) and then given their attributes; none runs code of its own on the way.
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
    _enum,
    _no_source,
)


# The (module, name) pairs `_Loader.find_class` hands out: the data classes, this module's
# constructors and jax's default pytree registry (a PyTreeDef's state names it).
_FOUND: dict[tuple[str, str], Any] = {
    **{_key(t): t for t in (*_DATA_TYPES, *_CONSTRUCTORS)},
    ("jax._src.tree_util", "default_registry"): tree_util.default_registry,
}
ALLOWED: frozenset[tuple[str, str]] = frozenset(_FOUND)


class _Loader(pickle._Unpickler):
    """pickle's own (Python) unpickler, made to build only allowed objects:

    - globals come from `_FOUND` only (never imported by name);
    - REDUCE and NEWOBJ call only what a global handed out (not an object the bytes built);
    - BUILD sets attributes only on objects NEWOBJ made in this load, and APPEND, SETITEM and
      ADDITEMS fill only plain lists, dicts and sets: the bytes cannot alter a shared object
      (a primitive, a dtype, an interned type) of the judging process.
    """

    dispatch: ClassVar[dict[int, Callable[..., Any]]] = dict(pickle._Unpickler.dispatch)

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
        pickle._Unpickler.load_reduce(self)

    def _load_newobj(self) -> None:
        self._callable(self.stack[-2], "NEWOBJ")
        if self.stack[-2] not in _DATA_TYPES:
            raise NotTransportable("NEWOBJ of a constructor")
        pickle._Unpickler.load_newobj(self)
        self._made.append(self.stack[-1])
        self._made_ids.add(id(self.stack[-1]))

    def _load_build(self) -> None:
        if id(self.stack[-2]) not in self._made_ids:
            raise NotTransportable("BUILD of an object the bytes did not make")
        pickle._Unpickler.load_build(self)

    def _into(self, kind: type, depth: int, opcode: str) -> None:
        target = self.stack[-depth] if depth else self.metastack[-1][-1]
        if type(target) is not kind:
            raise NotTransportable(f"{opcode} into a {type(target).__name__}")

    def _load_append(self) -> None:
        self._into(list, 2, "APPEND")
        pickle._Unpickler.load_append(self)

    def _load_appends(self) -> None:
        self._into(list, 0, "APPENDS")
        pickle._Unpickler.load_appends(self)

    def _load_setitem(self) -> None:
        self._into(dict, 3, "SETITEM")
        pickle._Unpickler.load_setitem(self)

    def _load_setitems(self) -> None:
        self._into(dict, 0, "SETITEMS")
        pickle._Unpickler.load_setitems(self)

    def _load_additems(self) -> None:
        self._into(set, 0, "ADDITEMS")
        pickle._Unpickler.load_additems(self)

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
