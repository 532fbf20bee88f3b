"""The judge's interpreter computes a kernel's matmuls as a TPU does: f32 operands at Mosaic's
default precision take one bf16 pass (measured on a v5e, benchmarks/mosaic_f32_dot.py), so
they are rounded to bf16 before the product; HIGHEST stays exact f32; bf16 and integer operands
are left alone. Each way of writing a matmul in a kernel body is tried, in the places a body
hides one (a loop, a `pl.when`, a scoped scratch)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.extend.core import jaxpr_as_fun

from maxkernel_tui.kernels.evaluation.tracer.transport import interpreted

X = jax.random.uniform(jax.random.key(0), (128, 512), jnp.float32)
W = jax.random.normal(jax.random.key(1), (512, 128), jnp.float32)
EXACT = np.asarray(X, np.float64) @ np.asarray(W, np.float64)
ONE_PASS = np.asarray(X.astype(jnp.bfloat16), np.float64) @ np.asarray(
    W.astype(jnp.bfloat16), np.float64
)
F32_SUMS = 1e-4  # f32 summation over K 512 of products near 1: far below bf16's rounding
HIGHEST = jax.lax.Precision.HIGHEST


def _plain(x_ref, w_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)


def _operator(x_ref, w_ref, o_ref):
    o_ref[...] = x_ref[...] @ w_ref[...]


def _einsum_default_tuple(x_ref, w_ref, o_ref):
    default = jax.lax.Precision.DEFAULT
    o_ref[...] = jnp.einsum("mk,kn->mn", x_ref[...], w_ref[...], precision=(default, default))


def _dot_general_transposed(x_ref, w_ref, o_ref):
    # the weight read transposed: (n, k) contracted on both last axes
    wt = w_ref[...].T
    o_ref[...] = jax.lax.dot_general(x_ref[...], wt, (((1,), (1,)), ((), ())))


def _in_a_loop_and_a_when(x_ref, w_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)

    @pl.when(x_ref[0, 0] >= 0)  # always true: uniform inputs
    def _():
        def step(i, acc):
            part = x_ref[:, pl.ds(i * 128, 128)]
            return acc + jnp.dot(part, w_ref[pl.ds(i * 128, 128), :])

        o_ref[...] = jax.lax.fori_loop(0, 4, step, jnp.zeros(o_ref.shape, jnp.float32))


def _in_scoped_scratch(x_ref, w_ref, o_ref):
    def scoped(acc_ref):
        acc_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)
        o_ref[...] = acc_ref[...]

    pl.run_scoped(scoped, pltpu.VMEM((128, 128), jnp.float32))


def _highest(x_ref, w_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], w_ref[...], precision=HIGHEST)


def _mixed_bf16_lhs(x_ref, w_ref, o_ref):
    # a bf16 operand beside an f32 one: Mosaic takes both as bf16 at the default precision
    lhs = x_ref[...].astype(jnp.bfloat16)
    o_ref[...] = jax.lax.dot_general(
        lhs, w_ref[...], (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32
    )


def _judged(body):
    def program(x, w):
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32))(x, w)

    closed = jax.make_jaxpr(program)(X, W)
    run = jaxpr_as_fun(interpreted(closed, pltpu.InterpretParams()))
    return np.asarray(jax.jit(run)(X, W)[0], np.float64)


@pytest.mark.parametrize(
    "body",
    [
        _plain,
        _operator,
        _einsum_default_tuple,
        _dot_general_transposed,
        _in_a_loop_and_a_when,
        _in_scoped_scratch,
        _mixed_bf16_lhs,
    ],
    ids=lambda f: f.__name__.strip("_"),
)
def test_f32_operands_at_the_default_precision_take_one_bf16_pass(body):
    got = _judged(body)
    assert np.abs(got - ONE_PASS).max() < F32_SUMS
    # and that is a real difference from f32: bf16's rounding is visible at this depth
    assert np.abs(got - EXACT).max() > 100 * F32_SUMS


def test_highest_stays_exact_f32():
    got = _judged(_highest)
    assert np.abs(got - EXACT).max() < F32_SUMS


def test_bf16_and_integer_operands_are_left_as_they_are():
    def int8_body(a_ref, b_ref, o_ref):
        o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.int32)

    a = jax.random.randint(jax.random.key(2), (128, 256), -100, 100, jnp.int8)
    b = jax.random.randint(jax.random.key(3), (256, 128), -100, 100, jnp.int8)
    call = functools.partial(
        pl.pallas_call, int8_body, out_shape=jax.ShapeDtypeStruct((128, 128), jnp.int32)
    )
    closed = jax.make_jaxpr(lambda a, b: call()(a, b))(a, b)
    got = jax.jit(jaxpr_as_fun(interpreted(closed, pltpu.InterpretParams())))(a, b)[0]
    want = np.asarray(a, np.int64) @ np.asarray(b, np.int64)
    assert np.array_equal(np.asarray(got), want)  # exact: no rounding reached the integers
