"""f32 GEMM + bias + sigmoid + row sum as a tiled Pallas TPU kernel.

The (rows, 1) output block stays resident across the N and K grid axes and accumulates the
sigmoid row sums of each (tm, tn) tile once its K reduction is complete.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _pick_tile(dim, candidates):
    for tile in candidates:
        if dim % tile == 0:
            return tile
    return dim


def _gemm_sigmoid_rowsum_kernel(x_ref, w_ref, b_ref, o_ref, acc_ref, rowsum_ref):
    j, kk = pl.program_id(1), pl.program_id(2)

    @pl.when(jnp.logical_and(j == 0, kk == 0))
    def _init_rowsum():
        rowsum_ref[...] = jnp.zeros_like(rowsum_ref)

    @pl.when(kk == 0)
    def _init_acc():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(kk == pl.num_programs(2) - 1)
    def _accumulate_rowsum():
        y = jax.nn.sigmoid(acc_ref[...] + b_ref[...])
        rowsum_ref[...] += jnp.sum(y, axis=1, keepdims=True)

    @pl.when(jnp.logical_and(j == pl.num_programs(1) - 1, kk == pl.num_programs(2) - 1))
    def _store():
        o_ref[...] = rowsum_ref[...].astype(o_ref.dtype)


def computation(x, weight, bias):
    m, k = x.shape
    n = weight.shape[1]
    # f32 operands are twice the bytes of bf16, so 512 tiles stay within scoped VMEM.
    tm = _pick_tile(m, (512, 256, 128))
    tn = _pick_tile(n, (512, 256, 128))
    tk = _pick_tile(k, (512, 256, 128))
    return pl.pallas_call(
        _gemm_sigmoid_rowsum_kernel,
        out_shape=jax.ShapeDtypeStruct((m, 1), x.dtype),
        grid=(m // tm, n // tn, k // tk),
        in_specs=[
            pl.BlockSpec((tm, tk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((tk, tn), lambda i, j, kk: (kk, j)),
            pl.BlockSpec((1, tn), lambda i, j, kk: (0, j)),
        ],
        out_specs=pl.BlockSpec((tm, 1), lambda i, j, kk: (i, 0)),
        scratch_shapes=[pltpu.VMEM((tm, tn), jnp.float32), pltpu.VMEM((tm, 1), jnp.float32)],
        # The row sum reduces over the N axis too, so only the row axis is parallel.
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "arbitrary", "arbitrary")),
    )(x, weight, bias.reshape(1, n))
