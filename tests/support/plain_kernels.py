"""Candidate kernels for the plain GEMM+bias+ReLU task of task_folders.py: an honest one that reads
its sizes from its inputs, and one that hard-codes the production shape."""

HONEST_GEMM = """
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_M = 256
BLOCK_N = 256
BLOCK_K = 512


# x @ w in three bf16 MXU passes, each f32 operand split into its bf16 rounding and the bf16
# rounding of the rest: one pass (Mosaic's default for f32 operands) is not enough for this
# task's tolerance.
def _three_passes(x, w):
    dot = functools.partial(jnp.dot, preferred_element_type=jnp.float32)
    x_high, w_high = x.astype(jnp.bfloat16), w.astype(jnp.bfloat16)
    x_low = (x - x_high.astype(jnp.float32)).astype(jnp.bfloat16)
    w_low = (w - w_high.astype(jnp.float32)).astype(jnp.bfloat16)
    return (dot(x_low, w_high) + dot(x_high, w_low)) + dot(x_high, w_high)


def _kernel(x_ref, w_ref, b_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += _three_passes(x_ref[...], w_ref[...])

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _done():
        o_ref[...] = jnp.maximum(acc_ref[...] + b_ref[...], 0.0).astype(o_ref.dtype)


def computation(x, w, b):
    m, depth = x.shape
    n = w.shape[1]
    return pl.pallas_call(
        _kernel,
        grid=(m // BLOCK_M, n // BLOCK_N, depth // BLOCK_K),
        in_specs=[
            pl.BlockSpec((BLOCK_M, BLOCK_K), lambda i, j, k: (i, k)),
            pl.BlockSpec((BLOCK_K, BLOCK_N), lambda i, j, k: (k, j)),
            pl.BlockSpec((1, BLOCK_N), lambda i, j, k: (0, j)),
        ],
        out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((BLOCK_M, BLOCK_N), jnp.float32)],
    )(x, w, b.reshape(1, n))
"""

HARD_CODED_GEMM = HONEST_GEMM.replace(
    "    m, depth = x.shape\n    n = w.shape[1]\n", "    m, depth, n = 256, 512, 256\n"
)
assert HARD_CODED_GEMM != HONEST_GEMM
