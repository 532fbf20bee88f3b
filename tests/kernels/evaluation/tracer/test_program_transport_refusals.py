"""Hostile programs and bytes given to evaluation/tracer/transport.py: what the untrusted
tracer cannot carry (host callbacks, Python functions) is refused at dump; bytes an attacker
wrote are refused at load with nothing run (no import, no call, no change to the judge's own
objects), and so are programs whose types, kernels or constants lie. In-process jax, fast."""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import subprocess
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from maxkernel_tui.kernels.evaluation.tracer import program_pickle
from maxkernel_tui.kernels.evaluation.tracer.transport import (
    NotTransportable,
    dump_program,
    load_program,
)

B = 128


# --- what is refused at dump -----------------------------------------------------------------


def _with_pure_callback(x):
    return jax.pure_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def _with_io_callback(x):
    from jax.experimental import io_callback

    return io_callback(lambda v: np.asarray(v), jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def _with_debug_print(x):
    jax.debug.print("x {}", x)
    return x + 1


def _with_debug_callback(x):
    jax.debug.callback(lambda v: None, x)
    return x + 1


def _with_callback_in_a_kernel_loop(x):
    def body(i, v):
        return jax.pure_callback(lambda a: np.asarray(a), jax.ShapeDtypeStruct(v.shape, v.dtype), v)

    return jax.lax.fori_loop(0, 2, body, x)


@pytest.mark.parametrize(
    "program, primitive",
    [
        (_with_pure_callback, "pure_callback"),
        (_with_io_callback, "io_callback"),
        (_with_debug_print, "debug_print"),
        (_with_debug_callback, "debug_callback"),
        (_with_callback_in_a_kernel_loop, "pure_callback"),
    ],
)
def test_a_program_with_a_host_callback_is_refused_at_dump(program, primitive):
    traced = jax.make_jaxpr(program)(jnp.ones((8, 128), jnp.float32))
    with pytest.raises(NotTransportable, match=primitive):
        dump_program(traced)


def test_a_python_function_in_a_parameter_is_refused_at_dump():
    """A parameter holding a function the rewrite does not know how to replace (here the
    grid environment of a pallas_call, which production_tiles sets and nothing else should)."""
    traced = _matmul_to_forge()
    eqn = traced.jaxpr.eqns[0]
    mapping = dataclasses.replace(eqn.params["grid_mapping"], local_grid_env=lambda *a: ())
    eqn.params = dict(eqn.params, grid_mapping=mapping)
    with pytest.raises(NotTransportable, match="local_grid_env holds a Python function"):
        dump_program(traced)


# --- what is refused at load, with nothing run ------------------------------------------------


def _matmul_kernel(x_ref, w_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)


def _matmul(x, w):
    return pl.pallas_call(
        _matmul_kernel,
        grid=(x.shape[0] // B,),
        in_specs=[pl.BlockSpec((B, B), lambda i: (i, 0)), pl.BlockSpec((B, B), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((B, B), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((x.shape[0], B), jnp.float32),
    )(x, w)


def _matmul_to_forge() -> Any:
    """A trace of `_matmul` of the test's own, to forge in place (jax caches traces and shares
    their objects: a round trip makes new ones)."""
    x, w = jnp.ones((2 * B, B), jnp.float32), jnp.ones((B, B), jnp.float32)
    return load_program(dump_program(jax.make_jaxpr(_matmul)(x, w)))


def test_a_program_whose_kernel_body_lies_about_its_types_is_refused_at_load():
    """A matmul operand recorded as 8 rows instead of 128 in the kernel body would make the
    kernel's counted work 16 times smaller; jax's own check does not enter kernel bodies."""
    traced = _matmul_to_forge()
    body = next(e for e in traced.jaxpr.eqns if e.primitive.name == "pallas_call").params["jaxpr"]
    dot = next(e for e in body.eqns if e.primitive.name == "dot_general")
    load_program(dump_program(traced))  # honest: loads
    dot.invars[0].aval = jax.core.ShapedArray((8, B), jnp.float32)
    with pytest.raises(NotTransportable, match="not well typed"):
        load_program(dump_program(traced))


class _Runs:
    """A pickle whose loading calls `call(*args)`."""

    def __init__(self, call: Any, *args: Any) -> None:
        self.call, self.args = call, args

    def __reduce__(self) -> Any:
        return self.call, self.args


def _marker_command(marker: Path) -> str:
    return f"touch {marker}"


def _carried_as_is(program: Any) -> bytes:
    """A program's bytes without dump_program's rewrite: what a forging tracer could send."""
    buffer = io.BytesIO()
    program_pickle.Dumper(buffer).dump(program)
    return buffer.getvalue()


def test_a_kernel_whose_operands_disagree_with_its_grid_mapping_is_refused_at_load():
    """The analyses read a kernel's blocks from its grid mapping and its work from its body:
    an operand recorded smaller than its block mapping's array would mislead them."""
    traced = _matmul_to_forge()
    load_program(_carried_as_is(traced))  # honest: loads
    traced.jaxpr.invars[0].aval = jax.core.ShapedArray((B, B), jnp.float32)
    with pytest.raises(
        NotTransportable,
        match=r"operand is f32\[128,128\] where its grid mapping says f32\[256,128\]",
    ):
        load_program(_carried_as_is(traced))


def test_a_kernel_carried_in_interpret_mode_is_refused_at_load():
    """Interpret mode chosen by the sender (the old HLO interpreter, where unwritten memory is
    not NaN) would replace the judge's; a TPU lowering would lower the interpreter."""

    def program(x, w):
        return pl.pallas_call(
            _matmul_kernel,
            grid=(x.shape[0] // B,),
            in_specs=[
                pl.BlockSpec((B, B), lambda i: (i, 0)),
                pl.BlockSpec((B, B), lambda i: (0, 0)),
            ],
            out_specs=pl.BlockSpec((B, B), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((x.shape[0], B), jnp.float32),
            interpret=True,
        )(x, w)

    traced = jax.make_jaxpr(program)(jnp.ones((256, B)), jnp.ones((B, B)))
    with pytest.raises(NotTransportable, match="interpret or debug set"):
        load_program(_carried_as_is(traced))
    loaded = load_program(dump_program(traced))  # an honest tracer's dump leaves it to the judge
    kernel = next(e for e in loaded.jaxpr.eqns if e.primitive.name == "pallas_call")
    assert kernel.params["interpret"] is False


def test_a_literal_whose_value_is_not_its_type_is_refused_at_load():
    """What runs is a literal's value and what the analyses read is its type: they agree."""
    traced = jax.make_jaxpr(lambda x: x * 2.0)(jnp.ones((4, 4), jnp.float32))
    (eqn,) = traced.jaxpr.eqns
    literal = next(a for a in eqn.invars if isinstance(a, jax.extend.core.Literal))
    literal.val = np.ones((64, 64), np.float32)
    with pytest.raises(NotTransportable, match="not well typed: JaxprTypeError: Literal value"):
        load_program(_carried_as_is(traced))


def test_a_constant_whose_value_is_not_its_type_is_refused_at_load():
    table = jnp.asarray(np.arange(16.0, dtype=np.float32).reshape(4, 4))
    traced = jax.make_jaxpr(lambda x: x + table)(jnp.ones((4, 4)))
    assert len(traced.consts) == 1
    forged = traced.replace(consts=[np.ones((64, 64), np.float32)])
    with pytest.raises(NotTransportable, match="a constant whose value does not have its type"):
        load_program(_carried_as_is(forged))
    forged = traced.replace(consts=[jax.lax.add_p])
    with pytest.raises(NotTransportable, match="a constant that is a Primitive"):
        load_program(_carried_as_is(forged))


def test_a_parameter_that_is_a_constructor_of_the_loader_is_refused_at_load():
    """The loader's constructors and classes are callable; jax calls some parameters (a
    kernel's grid environment, in interpret mode), so a parameter may hold none of them."""
    traced = _matmul_to_forge()
    eqn = traced.jaxpr.eqns[0]
    for callable_value in (program_pickle._unspecified, jax.extend.core.Var):
        mapping = dataclasses.replace(eqn.params["grid_mapping"], local_grid_env=callable_value)
        eqn.params = dict(eqn.params, grid_mapping=mapping)
        with pytest.raises(NotTransportable, match=r"local_grid_env holds .*, not data"):
            load_program(_carried_as_is(traced))


def test_a_program_that_holds_itself_is_refused_at_load():
    traced = jax.make_jaxpr(lambda x: jnp.sin(x))(jnp.ones((4,), jnp.float32))
    (eqn,) = traced.jaxpr.eqns
    eqn.params = dict(eqn.params, loop=traced.jaxpr)  # a cycle: the jaxpr in its own equation
    with pytest.raises(NotTransportable, match="RecursionError"):
        load_program(_carried_as_is(traced))


@pytest.mark.parametrize("how", ["os.system", "builtins.eval", "subprocess", "builtins.exec"])
def test_a_pickle_that_calls_a_function_is_refused_and_nothing_runs(how, tmp_path):
    marker = tmp_path / "ran"
    command = _marker_command(marker)
    code = f"open({str(marker)!r}, 'w').close()"
    payload = {
        "os.system": _Runs(os.system, command),
        "builtins.eval": _Runs(eval, code),
        "builtins.exec": _Runs(exec, code),
        "subprocess": _Runs(subprocess.call, ["sh", "-c", command]),
    }[how]
    data = pickle.dumps(payload, protocol=2)
    assert pickle.loads.__name__  # the plain unpickler would run it: see the control below
    with pytest.raises(NotTransportable, match="which a program may not"):
        load_program(data)
    assert not marker.exists()


def test_the_attacks_bytes_do_run_under_a_plain_unpickler(tmp_path):
    """Control: the same kind of payload is live, so the refusals above are the loader's."""
    marker = tmp_path / "ran"
    pickle.loads(pickle.dumps(_Runs(exec, f"open({str(marker)!r}, 'w').close()")))
    assert marker.exists()


def _global(module: str, name: str) -> bytes:
    """Protocol-0 bytes that name `module.name` and call it with no arguments."""
    return f"c{module}\n{name}\n(tR.".encode()


@pytest.mark.parametrize(
    "module, name",
    [
        ("jax._src.core", "eval_jaxpr"),  # an allowed module, an attribute that is not
        ("jax._src.core", "Primitive"),
        ("maxkernel_tui.kernels.evaluation.tracer.transport", "dump_program"),
        ("maxkernel_tui.kernels.evaluation.tracer.program_pickle", "_primitives"),
        ("jax._src.core", "Jaxpr.replace"),  # a dotted name into an allowed class
        ("jax._src.pallas.core", "GridMapping.__init__.__globals__"),
        ("numpy", "load"),
        ("builtins", "getattr"),
    ],
)
def test_a_pickle_naming_anything_not_allowed_is_refused(module, name):
    with pytest.raises(NotTransportable, match="which a program may not"):
        load_program(_global(module, name))


def test_an_oversized_payload_is_refused_before_it_is_read(tmp_path):
    marker = tmp_path / "ran"
    data = pickle.dumps(_Runs(os.system, _marker_command(marker))) + b"\0" * 1024
    with pytest.raises(NotTransportable, match="over the 1000"):
        load_program(data, max_bytes=1000)
    assert not marker.exists()


def _primitive_then(ops: bytes) -> bytes:
    """Bytes that fetch the judge's own `add` primitive and then apply `ops` to it."""
    module = program_pickle.__name__
    return f"c{module}\n_primitive\n(Vadd\ntR".encode() + ops


def test_bytes_cannot_alter_a_primitive_of_the_judge():
    """BUILD on an object the bytes did not make (here the judge's `add`, which the analyses
    count) would rename it for everything the judge does later; refused."""
    add = jax.lax.add_p
    build = b"(dVname\nVdot_general\nsb."
    with pytest.raises(NotTransportable, match="BUILD of an object the bytes did not make"):
        load_program(_primitive_then(build))
    assert add.name == "add"


def test_bytes_cannot_call_an_object_they_built():
    """REDUCE on a built object (not a global the loader handed out) is refused: only the
    allowed constructors are ever called."""
    module = program_pickle.__name__
    ops = f"c{module}\n_dtype\n(Vfloat32\ntR(tR.".encode()  # calls the dtype it got
    with pytest.raises(NotTransportable, match="REDUCE of something no allowed global named"):
        load_program(ops)


def test_a_refused_primitive_cannot_be_named_at_load():
    module = program_pickle.__name__
    data = f"c{module}\n_primitive\n(Vpure_callback\ntR.".encode()
    with pytest.raises(NotTransportable, match="pure_callback"):
        load_program(data)


def test_bytes_that_are_not_a_program_are_refused():
    with pytest.raises(NotTransportable, match="not a carried program"):
        load_program(pickle.dumps([1, 2, 3]))
    with pytest.raises(NotTransportable, match="not a carried program"):
        load_program(b"\x80\x05garbage")


def test_the_allowlist_names_only_data_types_and_this_modules_constructors():
    """What find_class may hand out, spelled out: a new entry is a reviewed decision."""
    constructors = {n for m, n in program_pickle.ALLOWED if m == program_pickle.__name__}
    assert constructors == {
        "_primitive",
        "_dtype",
        "_numpy_array",
        "_numpy_scalar",
        "_jax_array",
        "_eqn_context",
        "_shaped_array",
        "_typed_scalar",
        "_typed_array",
        "_empty_mesh",
        "_unspecified",
        "_unsharded",
        "_dynamic_grid_dim",
        "_frozen_dict",
        "_semaphore",
        "_enum",
        "_no_source",
    }
    others = {(m, n) for m, n in program_pickle.ALLOWED if m != program_pickle.__name__}
    assert all(m.startswith(("jax._src.", "jaxlib._jax.")) for m, _ in others)
    registries = {"default_registry", "none_leaf_registry", "tracing_registry"}
    assert not any(n.startswith("_") or "." in n for _, n in others if n not in registries)


def test_the_loader_reads_through_its_own_unpickler_only():
    """The restricted opcodes are those of pickle's Python unpickler, which _Loader is."""
    assert issubclass(program_pickle.Loader, pickle._Unpickler)
    loader = program_pickle.Loader(io.BytesIO(b""))
    assert loader.dispatch[pickle.BUILD[0]] is not pickle._Unpickler.dispatch[pickle.BUILD[0]]


# --- a program that branches on its platform --------------------------------------------------


def _by_platform(x):
    return jax.lax.platform_dependent(x, tpu=lambda v: v * 0.0, default=lambda v: v * 2.0)


def test_a_branch_per_platform_is_refused_at_dump():
    traced = jax.make_jaxpr(_by_platform)(jnp.ones((8, 128), jnp.float32))
    with pytest.raises(NotTransportable, match="platform_index: a branch per platform"):
        dump_program(traced)


def test_a_branch_per_platform_is_refused_at_load():
    """Bytes a lying tracer wrote with the dump's refusal switched off: the judge refuses the
    platform's index, and a cond that picks its branches by platform without one (lowering
    honours `branches_platforms` whatever the index is)."""
    traced = jax.make_jaxpr(_by_platform)(jnp.ones((8, 128), jnp.float32))
    refused = dict(program_pickle.REFUSED)
    del refused["platform_index"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(program_pickle, "REFUSED", refused)
        patch.setattr("maxkernel_tui.kernels.evaluation.tracer.transport.REFUSED", refused)
        data = dump_program(traced)
    with pytest.raises(NotTransportable, match="platform_index"):
        load_program(data)

    index_free = traced.jaxpr.replace(eqns=traced.jaxpr.eqns[1:])  # the cond's index: a literal
    cond = index_free.eqns[0]
    literal = jax.extend.core.Literal(np.int32(1), cond.invars[0].aval)
    index_free = index_free.replace(eqns=[cond.replace(invars=[literal, *cond.invars[1:]])])
    data = dump_program(jax.extend.core.ClosedJaxpr(index_free, traced.consts))
    with pytest.raises(NotTransportable, match="a cond with a branch per platform"):
        load_program(data)
