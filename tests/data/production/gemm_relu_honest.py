"""An honest GEMM + bias + ReLU: blocks of up to 512 that divide the shapes, an f32
accumulator over the depth steps, the epilogue on the last one."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _block(size, preferred):
    """The largest multiple of 128 up to `preferred` dividing `size`; `size` itself if none."""
    for block in range(min(preferred, size) // 128 * 128, 0, -128):
        if size % block == 0:
            return block
    return size


def _kernel(x_ref, w_ref, b_ref, o_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], precision=jax.lax.Precision.HIGHEST)

    @pl.when(k == pl.num_programs(2) - 1)
    def _epilogue():
        o_ref[...] = jnp.maximum(acc_ref[...] + b_ref[...], 0.0)


def computation(x, weight, bias):
    rows, depth = x.shape
    cols = weight.shape[1]
    tm, tn, tk = _block(rows, 512), _block(cols, 512), _block(depth, 512)
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((rows, cols), jnp.float32),
        grid=(rows // tm, cols // tn, depth // tk),
        in_specs=[
            pl.BlockSpec((tm, tk), lambda i, j, k: (i, k)),
            pl.BlockSpec((tk, tn), lambda i, j, k: (k, j)),
            pl.BlockSpec((1, tn), lambda i, j, k: (0, j)),
        ],
        out_specs=pl.BlockSpec((tm, tn), lambda i, j, k: (i, j)),
        scratch_shapes=[pltpu.VMEM((tm, tn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
    )(x, weight, bias.reshape(1, cols))
