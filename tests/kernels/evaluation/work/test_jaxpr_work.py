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


def test_a_transposed_convolution_needs_only_the_taps_that_meet_input_elements():
    """ConvTranspose3d (stride 2, kernel 4, padding 1) as jax writes it: the dilated input's
    zeros and the padding are no work, so an output meets at most 2 x 2 x 2 of its 4 x 4 x 4
    taps; in another layout (channels last, kernel DHWIO) the count is the same."""
    x = jax.ShapeDtypeStruct((2, 8, 4, 5, 6), jnp.float32)
    w = jax.ShapeDtypeStruct((8, 16, 4, 4, 4), jnp.float32)

    def transposed(a, b):
        return jax.lax.conv_general_dilated(
            a,
            b,
            (1, 1, 1),
            [(2, 2)] * 3,
            lhs_dilation=(2, 2, 2),
            dimension_numbers=("NCDHW", "IODHW", "NCDHW"),
        )

    def channels_last(a, b):
        a, b = jnp.transpose(a, (0, 2, 3, 4, 1)), jnp.transpose(b, (2, 3, 4, 0, 1))
        return jax.lax.conv_transpose(
            a, b, (2, 2, 2), [(2, 2)] * 3, dimension_numbers=("NDHWC", "DHWIO", "NDHWC")
        )

    # PyTorch's scatter form: input d meets tap k where 2d - 1 + k is an output position
    pairs = 1
    for size in (4, 5, 6):
        pairs *= sum(0 <= 2 * d - 1 + k < 2 * size for d in range(size) for k in range(4))
    assert pairs == 14 * 18 * 22  # each axis: every (input, tap) but the two past its ends
    for fn in (transposed, channels_last):
        work = measure(jax.make_jaxpr(fn)(x, w))
        assert work.xla_flops == 2 * (2 * 16) * 8 * pairs  # batch x out channels x in channels


def test_a_padded_convolution_does_not_count_the_padding():
    x = jax.ShapeDtypeStruct((1, 4, 5, 5), jnp.float32)
    w = jax.ShapeDtypeStruct((2, 4, 3, 3), jnp.float32)
    work = measure(
        jax.make_jaxpr(
            lambda a, b: jax.lax.conv_general_dilated(
                a, b, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")
            )
        )(x, w)
    )
    # per axis, 5 outputs x 3 taps less the 2 that fall on the padding
    assert work.xla_flops == 2 * 2 * 4 * 13 * 13
