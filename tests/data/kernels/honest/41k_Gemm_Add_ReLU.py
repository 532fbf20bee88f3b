"""f32 GEMM with a fused bias + ReLU epilogue as a tiled Pallas TPU kernel."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _pick_tile(dim, candidates):
    for tile in candidates:
        if dim % tile == 0:
            return tile
    return dim


def _three_passes(x, w):
    """x @ w in three bf16 MXU passes, each f32 operand split into its bf16 rounding and the
    bf16 rounding of the rest: one pass (Mosaic's default for f32 operands) is not enough for
    this task's tolerance at production's depth."""
    dot = functools.partial(jnp.dot, preferred_element_type=jnp.float32)
    x_high, w_high = x.astype(jnp.bfloat16), w.astype(jnp.bfloat16)
    x_low = (x - x_high.astype(jnp.float32)).astype(jnp.bfloat16)
    w_low = (w - w_high.astype(jnp.float32)).astype(jnp.bfloat16)
    return (dot(x_low, w_high) + dot(x_high, w_low)) + dot(x_high, w_high)


def _gemm_bias_relu_kernel(x_ref, w_ref, b_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += _three_passes(x_ref[...], w_ref[...])

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _epilogue():
        o_ref[...] = jnp.maximum(acc_ref[...] + b_ref[...], 0.0).astype(o_ref.dtype)


def computation(x, weight, bias):
    m, k = x.shape
    n = weight.shape[1]
    # f32 operands are twice the bytes of bf16, so 512 tiles stay within scoped VMEM.
    tm = _pick_tile(m, (512, 256, 128))
    tn = _pick_tile(n, (512, 256, 128))
    tk = _pick_tile(k, (512, 256, 128))
    return pl.pallas_call(
        _gemm_bias_relu_kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // tm, n // tn, k // tk),
        in_specs=[
            pl.BlockSpec((tm, tk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((tk, tn), lambda i, j, kk: (kk, j)),
            pl.BlockSpec((1, tn), lambda i, j, kk: (0, j)),
        ],
        out_specs=pl.BlockSpec((tm, tn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((tm, tn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, weight, bias.reshape(1, n))
