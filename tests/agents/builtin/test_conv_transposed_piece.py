"""The transposed 3-D convolution stage (pieces/conv_transposed.py) run directly in TPU interpret
mode at small shapes, against jax's own convolution of the dilated input: ConvTranspose3d's
geometry (stride 2, kernel 4, padding 1) over several blocks of output channels with a bias, a
kernel of odd taps whose phases differ in tap count and reach, unequal strides per axis (one
axis not dilated), channels too few to stack, bf16 operands and two results; and the kernel
never multiplies the dilation's zeros (its MXU work is the phases' taps only)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from maxkernel_tui.agents.builtin.pieces import conv_transposed
from maxkernel_tui.kernels import aot
from maxkernel_tui.kernels.perf.pallas_analysis import analyze
from tests.support.interpret import interpreted, normal

pytestmark = pytest.mark.slow  # interpret mode: seconds per kernel on a busy 2-core machine


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 8 output channels: several channel blocks per image."""
    monkeypatch.setattr(conv_transposed, "BLOCK_ROWS", 8)


def _run(*args, **kwargs):
    return interpreted(conv_transposed._transposed_volume_conv_stage, *args, **kwargs)


def _reference(image, kernel, dilation, padding):
    out = jax.lax.conv_general_dilated(
        image,
        kernel,
        (1, 1, 1),
        padding,
        lhs_dilation=dilation,
        precision=jax.lax.Precision.HIGHEST,
        preferred_element_type=jnp.float32,
    )
    return out.reshape(out.shape[0], out.shape[1], -1)  # (batch, channels, voxels)


def _copy(acc, out_ref, *, tm, tn):
    out_ref[...] = acc


def _bias_tanh(acc, bias_ref, out_ref, *, tm, tn):
    out_ref[...] = jnp.tanh(0.1 * (acc + bias_ref[...]))


def test_conv_transpose3d_geometry_with_a_bias_over_several_channel_blocks():
    """PyTorch's ConvTranspose3d(stride 2, padding 1, kernel 4): the dilated input padded by
    k - 1 - p = 2, the flipped kernel; eight phases of 2 x 2 x 2 taps."""
    image, kernel = normal(2, 8, 3, 4, 5), normal(16, 8, 4, 4, 4, seed=1)
    bias = normal(16, 1, seed=2)
    dilation, padding = (2, 2, 2), ((2, 2),) * 3
    got = _run(
        image,
        kernel,
        bias,
        roles=("row",),
        outputs=(("tile", jnp.float32),),
        batched=(False, True),
        epilogue=_bias_tanh,
        dilation=dilation,
        padding=padding,
        operands="highest",
    )
    want = jnp.tanh(0.1 * (_reference(image, kernel, dilation, padding) + bias))
    assert got.shape == (2, 16, 6 * 8 * 10)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("taps", "dilation", "padding"),
    [
        # odd taps: the phases take 2 and 1 taps and read different inputs
        ((3, 3, 3), (2, 2, 2), ((1, 2), (1, 2), (1, 2))),
        # one axis not dilated (a plain convolution along it), stride 3 along another
        ((3, 2, 3), (2, 1, 3), ((2, 1), (0, 0), (2, 2))),
        # output rows of 2 x 81 pixels: lane gathers over segments of 128, the last of 34
        ((4, 4, 4), (2, 2, 2), ((2, 2), (2, 2), (2, 2))),
    ],
)
def test_phases_of_unequal_taps_and_strides(taps, dilation, padding):
    width = 81 if taps == (4, 4, 4) else 5
    image, kernel = normal(1, 8, 3, 2, width, seed=3), normal(8, 8, *taps, seed=4)
    got = _run(
        image,
        kernel,
        roles=(),
        outputs=(("tile", jnp.float32),),
        batched=(True,),
        epilogue=_copy,
        dilation=dilation,
        padding=padding,
        operands="highest",
    )
    want = _reference(image, kernel, dilation, padding)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("shape", "chunk_pixels"),
    [
        ((1, 8, 2, 4, 32), 4096),  # rows of 64 output lanes: two per vreg (28k's)
        ((2, 8, 2, 6, 16), 64),  # rows of 32 lanes, chunks of two input rows
        ((1, 8, 2, 3, 64), 4096),  # rows of a whole vreg
    ],
)
def test_whole_vreg_interleaving_at_stride_two(shape, chunk_pixels):
    """Input rows laid out an output row apart: the phases interleave 128 lanes at a time."""
    image, kernel = normal(*shape, seed=7), normal(8, 8, 4, 4, 4, seed=8)
    dilation, padding = (2, 2, 2), ((2, 2),) * 3
    got = _run(
        image,
        kernel,
        roles=(),
        outputs=(("tile", jnp.float32),),
        batched=(True,),
        epilogue=_copy,
        dilation=dilation,
        padding=padding,
        operands="highest",
        chunk_pixels=chunk_pixels,
    )
    np.testing.assert_allclose(got, _reference(image, kernel, dilation, padding), atol=1e-5)


def test_few_channels_bf16_operands_and_two_results():
    image, kernel = normal(2, 3, 2, 3, 4, seed=5), normal(8, 3, 4, 4, 4, seed=6)
    dilation, padding = (2, 2, 2), ((2, 2),) * 3

    def epilogue(acc, out_ref, half_ref, *, tm, tn):
        out_ref[...] = acc
        half_ref[...] = (0.5 * acc).astype(half_ref.dtype)

    out, half = _run(
        image,
        kernel,
        roles=(),
        outputs=(("tile", jnp.float32), ("tile", jnp.bfloat16)),
        batched=(True, True),
        epilogue=epilogue,
        dilation=dilation,
        padding=padding,
        operands="bf16",
    )
    rounded = [a.astype(jnp.bfloat16).astype(jnp.float32) for a in (image, kernel)]
    want = _reference(*rounded, dilation, padding)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(half.astype(jnp.float32), 0.5 * want, rtol=1e-2, atol=1e-2)


def _stage_of(image, kernel, operands=None):
    return conv_transposed._transposed_volume_conv_stage(
        image,
        kernel,
        roles=(),
        outputs=(("tile", jnp.float32),),
        batched=(True,),
        epilogue=_copy,
        dilation=(2, 2, 2),
        padding=((2, 2),) * 3,
        operands=operands,
    )


def test_the_kernel_multiplies_only_the_phases_taps():
    """The MXU work the model counts is the transposed convolution's own (each output voxel
    meets 2 x 2 x 2 taps), not the dilated form's 4 x 4 x 4."""
    image = jax.ShapeDtypeStruct((2, 8, 4, 8, 8), jnp.float32)
    kernel = jax.ShapeDtypeStruct((16, 8, 4, 4, 4), jnp.float32)
    (analysis,) = analyze(jax.make_jaxpr(_stage_of)(image, kernel))
    assert analysis.grid == [2, 2, 4]  # images, blocks of 8 output channels, depth per phase
    flops = analysis.mxu_flops_per_step * analysis.steps
    useful = 2 * 2 * 16 * (8 * 16 * 16) * 8 * 8  # 2 x batch x out channels x voxels x taps
    # input rows laid out an output row (16 lanes) apart, for whole-vreg interleaving: twice
    # the 8 columns a phase's row has (the dilated form: 8 times the taps)
    assert flops == 2 * useful


def test_the_kernel_compiles_for_v5e_at_28k_plane_sizes():
    """Planes of 64 x 64 output pixels from 34 x 34 padded input pixels, width phases
    interleaved by a stack and reshape (Mosaic refuses a store strided along the lanes)."""
    image = jax.ShapeDtypeStruct((2, 32, 4, 32, 32), jnp.float32)
    kernel = jax.ShapeDtypeStruct((64, 32, 4, 4, 4), jnp.float32)
    compiled = aot.compile_for_tpu(
        lambda i, k: _stage_of(i, k, "bf16"), [image, kernel], aot.target_for("v5e")
    )
    assert compiled.cost_analysis() is not None
