"""Heavy work is attributed to Pallas or to XLA from the jaxpr, through nested jit."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from maxkernel_tui.kernels.evaluation.work.jaxpr_work import measure

X = jax.ShapeDtypeStruct((256, 512), jnp.float32)
W = jax.ShapeDtypeStruct((512, 128), jnp.float32)


def _relu_kernel(x_ref, o_ref):
    o_ref[...] = jnp.maximum(x_ref[...], 0)


def _relu(y):
    return pl.pallas_call(
        _relu_kernel, out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype), interpret=True
    )(y)


def test_matmul_outside_pallas_is_counted_through_nested_jit():
    work = measure(jax.make_jaxpr(lambda x, w: _relu(jax.jit(jnp.matmul)(x, w)).sum())(X, W))
    assert work.has_pallas and len(work.pallas_calls) == 1
    assert work.xla_flops == 2 * 256 * 512 * 128
    assert work.xla_reduced == 256 * 128


def test_plain_jnp_has_no_pallas():
    work = measure(jax.make_jaxpr(lambda x, w: jnp.maximum(x @ w, 0))(X, W))
    assert not work.has_pallas and work.xla_flops == 2 * 256 * 512 * 128


def test_convolution_flops():
    x = jax.ShapeDtypeStruct((2, 8, 16, 16), jnp.float32)
    w = jax.ShapeDtypeStruct((4, 8, 3, 3), jnp.float32)
    conv = jax.make_jaxpr(
        lambda a, b: jax.lax.conv_general_dilated(
            a, b, (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW")
        )
    )(x, w)
    assert measure(conv).xla_flops == 2 * (2 * 4 * 14 * 14) * (8 * 3 * 3)
