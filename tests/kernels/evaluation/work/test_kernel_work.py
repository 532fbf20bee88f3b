"""A kernel body's matmul flops over its grid: a loop counts its length times, each `cond`
(`pl.when`) its most expensive branch, with the conds a branch holds in turn, and that part is
said to be conditional."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from maxkernel_tui.kernels.evaluation.work.kernel_work import program_work

X = jax.ShapeDtypeStruct((8, 128), jnp.float32)
W = jax.ShapeDtypeStruct((128, 128), jnp.float32)
DOT = 2 * 8 * 128 * 128  # one (8, 128) x (128, 128) matmul


def _branchy_kernel(x_ref, w_ref, o_ref):
    def dot(acc):
        return acc + jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    o_ref[...] = dot(jnp.zeros(o_ref.shape, jnp.float32))  # 1 dot, always

    @pl.when(pl.program_id(0) == 0)
    def _two_and_maybe_one():  # 2 dots, and 1 more under a nested pl.when: at most 3
        o_ref[...] = dot(dot(o_ref[...]))

        @pl.when(pl.program_id(1) == 0)
        def _one():
            o_ref[...] = dot(o_ref[...])

    # a cond of two branches: 3 dots in a loop of 3, or none; at most 3
    o_ref[...] = jax.lax.cond(
        pl.program_id(1) == 1,
        lambda acc: jax.lax.fori_loop(0, 3, lambda i, a: dot(a), acc),
        lambda acc: acc,
        o_ref[...],
    )


def test_loops_multiply_and_each_cond_counts_its_most_expensive_branch():
    def program(x, w):
        return pl.pallas_call(
            _branchy_kernel,
            grid=(2, 3),
            in_specs=[
                pl.BlockSpec((8, 128), lambda i, j: (0, 0)),
                pl.BlockSpec((128, 128), lambda i, j: (0, 0)),
            ],
            out_specs=pl.BlockSpec((8, 128), lambda i, j: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        )(x, w)

    (kernel,) = program_work(jax.make_jaxpr(program)(X, W)).kernels
    assert kernel.steps == 6
    assert kernel.mxu_flops == 6 * (1 + 3 + 3) * DOT
    assert kernel.conditional_flops == 6 * (3 + 3) * DOT
    assert kernel.exact
    assert {"cond", "scan", "dot_general"} <= set(kernel.operations)
