"""A traced program carried as bytes from the process that traced it to one that judges it.
Imports jax.

Trust model: the process that imports a candidate kernel is the candidate's: its module can
patch anything in it, so nothing judged there can be believed. That process only traces and
calls `dump_program`; a judge that never imports the candidate calls `load_program` on the
bytes and runs every check on what it gets. Whatever the candidate does, what it sends is
simply the program that is judged.

`dump_program` (untrusted side; it protects nothing, it only makes an honest program
transportable) rewrites the program so that it holds no Python callables: `custom_jvp_call`,
`custom_vjp_call` and `remat2` (jax.checkpoint) are inlined, their primal body in their place,
everywhere (Pallas kernel bodies and index maps included); host callbacks and `debug_print`
are refused; source tracebacks are dropped (a kernel's name, which the analyses report, is
kept); a pallas_call is carried as traced for a TPU (interpret and debug off). The bytes are
written by evaluation/tracer/program_pickle.py.

`load_program` (trusted side, on bytes an attacker chose) reads them with program_pickle's
`Loader`, which builds only allowed jax data (`ALLOWED`) and runs nothing else, then checks
what the judge relies on in every jaxpr of the result (`_check_program`). A loaded program
runs its kernels in interpret mode through `interpreted`, with the judge's parameters.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import numpy as np
from jax._src import config as jax_config
from jax._src import core as jax_core
from jax._src import effects as jax_effects
from jax._src import linear_util as lu
from jax.extend import core

from maxkernel_tui.kernels.evaluation.tracer.mxu_numerics import interpreted_kernel
from maxkernel_tui.kernels.evaluation.tracer.program_pickle import (
    ALLOWED,
    MAX_BYTES,
    NO_SOURCE,
    REFUSED,
    Dumper,
    Loader,
    NotTransportable,
    describe,
    is_function,
)

__all__ = [
    "ALLOWED",
    "MAX_BYTES",
    "REFUSED",
    "NotTransportable",
    "dump_program",
    "interpreted",
    "load_program",
]

# Primitives replaced by their primal body at dump: each holds Python functions (derivative
# rules, a rematerialisation policy) that no other process could receive, and none changes the
# primal computation a judge runs.
_INLINED = {"custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "remat2": "jaxpr"}


def dump_program(closed_jaxpr: core.ClosedJaxpr) -> bytes:
    """The program as bytes `load_program` rebuilds exactly (run where the program was traced)."""
    rewritten = _Rewriter(_as_traced_for_tpu).closed(closed_jaxpr)
    buffer = io.BytesIO()
    try:
        Dumper(buffer).dump(rewritten)
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
        program = Loader(io.BytesIO(data)).load()
        if not isinstance(program, core.ClosedJaxpr):
            raise NotTransportable(f"not a carried program: a {type(program).__name__}")
        _check_program(program)
    except NotTransportable:
        raise
    except Exception as error:  # malformed bytes: whatever pickle, a constructor or a check
        # raised (a cycle in the program ends in RecursionError)
        raise NotTransportable(f"not a carried program: {_first_line(error)}") from None
    return program


def _check_program(program: core.ClosedJaxpr) -> None:
    """What the analyses and the runs rely on, checked in every jaxpr the program holds
    (kernel bodies and index maps too, which jax's own check does not enter):

    - it types as its operations say, literals included (jax's check): the analyses read
      shapes from the variables' types, and forged ones (a matmul operand recorded smaller
      than it is) would mislead them;
    - constants are arrays of their variable's shape and type (what runs is what was typed);
    - parameters are data: no class or function (the loader's own constructors are callable,
      and jax calls some parameters, e.g. a kernel's grid environment in interpret mode);
    - a kernel's grid mapping agrees with itself (Pallas's own invariants), with the kernel's
      operands and results and with its body's references (`_check_kernel`);
    - no pallas_call is carried with interpret or debug set: how a kernel is interpreted is
      the judge's choice (`interpreted`), on a TPU it runs Mosaic, and a debug kernel prints
      into the judge's output;
    - no cond picks its branches by platform (`branches_platforms`, which lowering honours
      whatever the index): the CPU and the TPU would run different branches.
    """
    for jaxpr, consts in _jaxprs(program):
        if consts is not None:
            if len(consts) != len(jaxpr.constvars):
                raise NotTransportable("a closed jaxpr with the wrong number of constants")
            for var, const in zip(jaxpr.constvars, consts, strict=True):
                _check_value(const, var.aval, "a constant")
        try:
            jax_core.check_jaxpr(jaxpr)
        except jax_core.JaxprTypeError as error:
            raise NotTransportable(f"the program is not well typed: {_first_line(error)}") from None
        for eqn in jaxpr.eqns:
            _check_data(eqn.params, eqn.primitive.name)
            if eqn.primitive.name == "pallas_call":
                _check_kernel(eqn)
            if eqn.primitive.name == "cond" and eqn.params.get("branches_platforms") is not None:
                raise NotTransportable(
                    "a cond with a branch per platform: interpret mode on the CPU would not "
                    "judge what the TPU runs"
                )


def _check_kernel(eqn: core.JaxprEqn) -> None:
    params = eqn.params
    if params.get("interpret") is not False or params.get("debug") is not False:
        raise NotTransportable("a pallas_call carried with interpret or debug set")
    mapping, body = params["grid_mapping"], params["jaxpr"]
    try:
        with jax_config.enable_checks(True):  # Pallas checks its invariants only when asked
            mapping.check_invariants()
    except AssertionError as error:
        raise NotTransportable(f"a kernel whose grid mapping is inconsistent: {error}") from None
    first = mapping.num_index_operands
    blocks = mapping.block_mappings
    inputs, outputs = blocks[: mapping.num_inputs], blocks[mapping.num_inputs :]
    # the operands end with the inputs (before them: references the kernel closes over,
    # dynamic grid bounds and scalar-prefetch operands)
    operands = eqn.invars[len(eqn.invars) - len(inputs) :]
    pairs = [
        *(("operand", v.aval, b.array_aval) for v, b in zip(operands, inputs)),
        *(("result", v.aval, b.array_aval) for v, b in zip(eqn.outvars, outputs)),
        *(("body reference", v.aval, b.ref_aval) for v, b in zip(body.invars[first:], blocks)),
    ]
    short = (
        len(eqn.invars) < len(inputs)
        or len(eqn.outvars) != len(outputs)
        or len(body.invars) < first + len(blocks)
    )
    for what, carried, mapped in pairs:
        if short or (carried.shape, carried.dtype) != (mapped.shape, mapped.dtype):
            raise NotTransportable(
                f"a kernel whose {what} is {carried.str_short(short_dtypes=True)} where its "
                f"grid mapping says {mapped.str_short(short_dtypes=True)}"
            )


def _check_data(value: Any, where: str) -> None:
    if isinstance(value, type) or is_function(value):
        raise NotTransportable(f"{where} holds {describe(value)}, not data")
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_data(item, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_data(item, f"{where}.{key}")
    elif dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            _check_data(getattr(value, field.name), f"{where}.{field.name}")


def _check_value(value: Any, aval: Any, what: str) -> None:
    if not isinstance(value, (*_VALUE_TYPES, jax.Array)):
        raise NotTransportable(f"{what} that is a {type(value).__name__}, not an array")
    shape = tuple(getattr(aval, "shape", ()))
    dtype = getattr(value, "dtype", None)
    if np.shape(value) != shape or (dtype is not None and dtype != aval.dtype):
        raise NotTransportable(f"{what} whose value does not have its type {aval}")


# What constants may be: arrays and scalars.
_VALUE_TYPES = (np.ndarray, np.generic, bool, int, float, complex)


def interpreted(program: core.ClosedJaxpr, params: Any) -> core.ClosedJaxpr:
    """The program with every pallas_call run in interpret mode with `params` (e.g.
    `pltpu.InterpretParams`): what `force_tpu_interpret_mode` does for a program traced under
    it, for a program that was traced elsewhere, with the kernels' matmuls rounded as a TPU
    rounds them (mxu_numerics.py)."""
    return _Rewriter(lambda kernel: interpreted_kernel(kernel, params), effects=True).closed(
        program
    )


def _as_traced_for_tpu(kernel: dict[str, Any]) -> dict[str, Any]:
    """A kernel's parameters as a plain TPU trace has them: interpret mode is the judge's
    choice, and the debug flag prints from the process that lowers the kernel."""
    return dict(kernel, interpret=False, debug=False)


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:300] if lines else ''}"


def _jaxprs(value: Any) -> Iterator[tuple[core.Jaxpr, Sequence[Any] | None]]:
    """Every jaxpr a program holds, in every parameter (Pallas kernel bodies and index maps
    included), with its constants when it is a closed one."""
    if isinstance(value, core.ClosedJaxpr):
        yield value.jaxpr, value.consts
        for eqn in value.jaxpr.eqns:
            yield from _jaxprs(eqn.params)
    elif isinstance(value, core.Jaxpr):
        yield value, None
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


class _Rewriter:
    """A copy of a program without custom derivatives, callbacks or source tracebacks. A jaxpr
    shared by several equations is rewritten once and stays shared."""

    def __init__(
        self,
        kernel_params: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        effects: bool = False,
    ) -> None:
        self._done: dict[int, Any] = {}
        self._kernel_params = kernel_params
        # Whether the new kernel parameters change effects (interpret mode talks to the host):
        # each rewritten kernel's are then derived again and carried up to every enclosing
        # equation and jaxpr, as tracing the program with those parameters would have.
        self._effects = effects

    def closed(self, closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
        key = id(closed)
        if key not in self._done:
            self._done[key] = (closed, core.ClosedJaxpr(self.jaxpr(closed.jaxpr), closed.consts))
        done: core.ClosedJaxpr = self._done[key][1]
        return done

    def jaxpr(self, jaxpr: core.Jaxpr) -> core.Jaxpr:
        key = id(jaxpr)
        if key not in self._done:
            self._done[key] = (jaxpr, self._rewrite(jaxpr))
        done: core.Jaxpr = self._done[key][1]
        return done

    def _rewrite(self, jaxpr: core.Jaxpr) -> core.Jaxpr:
        renamed: dict[core.Var, Any] = {}  # outputs of inlined calls: the atoms that replace them

        def atom(a: Any) -> Any:
            return renamed.get(a, a) if isinstance(a, core.Var) else a

        eqns: list[core.JaxprEqn] = []
        added: set[Any] = set()  # effects the rewritten equations have beyond their own
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            args = [atom(a) for a in eqn.invars]
            if name in _INLINED:
                body = eqn.params[_INLINED[name]]
                if isinstance(body, core.Jaxpr):
                    body = core.ClosedJaxpr(body, ())
                outs = _inline(name, self.closed(body), args, eqns)
                for var, out in zip(eqn.outvars, outs, strict=True):
                    renamed[var] = out
                continue
            if name in REFUSED:
                raise NotTransportable(f"{name}: {REFUSED[name]}")
            params = {k: self._value(v, f"{name}.{k}") for k, v in eqn.params.items()}
            if name == "pallas_call":
                params = self._kernel_params(params)
            new = eqn.replace(invars=args, params=params, source_info=NO_SOURCE)
            if self._effects:
                new = _with_effects(new)
                added |= set(new.effects) - set(eqn.effects)
            eqns.append(new)
        rewritten: core.Jaxpr = jaxpr.replace(
            eqns=eqns,
            outvars=[atom(a) for a in jaxpr.outvars],
            debug_info=_plain_debug_info(jaxpr.debug_info),
            effects=jaxpr.effects | added,
        )
        return rewritten

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
        if is_function(value):
            raise NotTransportable(f"{where} holds a Python function ({describe(value)})")
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


def _with_effects(eqn: core.JaxprEqn) -> core.JaxprEqn:
    """The equation with the effects its rewritten parameters give it: a kernel's from its
    abstract evaluation, any other's with those of the jaxprs it holds (effects that name an
    input by position are the equation's own already)."""
    if eqn.primitive.name == "pallas_call":
        _, effects = eqn.primitive.abstract_eval(*(v.aval for v in eqn.invars), **eqn.params)
        with_kernel: core.JaxprEqn = eqn.replace(effects=set(eqn.effects) | set(effects))
        return with_kernel
    inner: set[Any] = set()
    for value in eqn.params.values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, (core.Jaxpr, core.ClosedJaxpr)):
                inner |= {
                    e for e in item.effects if not isinstance(e, jax_effects.JaxprInputEffect)
                }
    return eqn.replace(effects=set(eqn.effects) | inner) if inner - set(eqn.effects) else eqn


def _inline(
    name: str, body: core.ClosedJaxpr, args: Sequence[Any], eqns: list[core.JaxprEqn]
) -> list[Any]:
    """Append `body`'s equations applied to `args` (fresh variables: the same body may be
    inlined twice); its outputs as atoms of the caller."""
    inner = body.jaxpr
    if any(isinstance(e, jax_effects.JaxprInputEffect) for e in inner.effects):
        # such effects name an input of the body by position, which inlining would change
        raise NotTransportable(f"a {name} that reads or writes references")
    env: dict[core.Var, Any] = dict(zip(inner.invars, args, strict=True))
    for var, const in zip(inner.constvars, body.consts, strict=True):
        if not jax_core.is_literalable(const):
            raise NotTransportable(f"a {name} that closes over an array constant")
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
        info.func_src_info,
        None if info.arg_names is None else tuple(info.arg_names),
        paths,
    )
