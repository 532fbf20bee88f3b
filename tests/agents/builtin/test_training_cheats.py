"""The rejectable training candidates of tests/support/training_kernels.py are what they claim:
the dropped dS term leaves the output, dq and dv right and dk wrong; the jnp backward gives the
right gradients with no pallas_call in the backward (only the trace check can catch it)."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.loader import builtin_training_dir, find_task, load_tasks
from tests.support.training_kernels import wrong_dk_source, xla_backward_source

pytestmark = pytest.mark.slow  # interpret mode at check shapes
INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")


def _module(source):
    module = types.ModuleType("cheat")
    exec(compile(source, "<cheat>", "exec"), module.__dict__)
    return module


def _gradients(function, dynamic, static):
    def call(*args):
        return function(*args, *static)

    out, pullback = jax.vjp(call, *dynamic)
    cotangent = jax.random.normal(jax.random.key(3), out.shape, jnp.float32).astype(out.dtype)
    return out, pullback(cotangent)


def _inputs(task_id):
    task = find_task(task_id, load_tasks(builtin_training_dir())[0])
    reference = runtime.load_reference(task)
    return reference, *runtime.make_inputs(task, reference, "check", seed=0)


def test_the_dropped_term_breaks_dk_only():
    reference, dynamic, static = _inputs("4t")
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        out, (dq, dk, dv) = _gradients(_module(wrong_dk_source()).computation, dynamic, static)
    want, (want_dq, want_dk, want_dv) = _gradients(reference.computation, dynamic, static)

    def close(a, b):
        return np.allclose(np.asarray(a, np.float32), np.asarray(b, np.float32), 0.02, 0.05)

    assert close(out, want) and close(dq, want_dq) and close(dv, want_dv)
    assert not close(dk, want_dk)


def test_the_jnp_backward_is_right_and_outside_pallas():
    reference, dynamic, static = _inputs("1t")
    cheat = _module(xla_backward_source()).computation
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        _, grads = _gradients(cheat, dynamic, static)
    _, want = _gradients(reference.computation, dynamic, static)
    for grad, expected in zip(grads, want, strict=True):
        np.testing.assert_allclose(
            np.asarray(grad, np.float32), np.asarray(expected, np.float32), atol=0.125, rtol=0.02
        )
    traced = str(jax.make_jaxpr(lambda *d: _gradients(cheat, d, static))(*dynamic))
    assert traced.count("pallas_call") == 1  # the forward's; the backward has none
