"""The convolution stage's module (pieces/conv.py) run directly in TPU interpret mode at small
shapes, against jax's own convolution: several blocks of output channels with a per-channel
bias and ReLU at full f32 precision, a non-square image and kernel with bf16 operands, a
per-pixel operand shared by every image and a result per channel, and a bf16 image."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import conv

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
pytestmark = pytest.mark.slow  # interpret mode: seconds per kernel on a busy 2-core machine


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 8 output channels: several channel blocks per image."""
    monkeypatch.setattr(conv, "BLOCK_ROWS", 8)


def _random(*shape, dtype=jnp.float32, seed=0):
    return jax.random.normal(jax.random.key(seed), shape, dtype)


def _run(*args, **kwargs):
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        return jax.block_until_ready(conv._conv_stage(*args, **kwargs))


def _reference(image, kernel, precision=jax.lax.Precision.HIGHEST):
    out = jax.lax.conv_general_dilated(
        image, kernel, (1, 1), "VALID", precision=precision, preferred_element_type=jnp.float32
    )
    return out.reshape(out.shape[0], out.shape[1], -1)  # (batch, channels, pixels)


def test_a_bias_and_relu_over_several_blocks_of_output_channels():
    image, kernel = _random(2, 4, 10, 10), _random(16, 4, 3, 3, seed=1)
    bias = _random(16, 1, seed=2)

    def epilogue(acc, bias_ref, out_ref, *, tm, tn):
        assert (tm, tn) == (8, 64)  # 8 of 16 channels, every pixel of the 8x8 output
        out_ref[...] = jnp.maximum(acc + bias_ref[...], 0.0)

    got = _run(
        image,
        kernel,
        bias,
        roles=("row",),
        outputs=(("tile", jnp.float32),),
        batched=(False, True),
        epilogue=epilogue,
        operands="highest",
    )
    want = jax.nn.relu(_reference(image, kernel) + bias)
    assert got.shape == (2, 16, 64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_a_rectangular_kernel_with_bf16_operands_a_shared_pixel_operand_and_a_channel_result():
    image, kernel = _random(3, 8, 6, 9), _random(16, 8, 2, 4, seed=1)
    pixels = (6 - 2 + 1) * (9 - 4 + 1)
    weights = _random(1, pixels, seed=2)

    def epilogue(acc, weights_ref, out_ref, total_ref, *, tm, tn):
        out_ref[...] = acc.astype(out_ref.dtype)
        total_ref[...] = jnp.sum(acc * weights_ref[...], axis=1, keepdims=True)

    out, total = _run(
        image,
        kernel,
        weights,
        roles=("col",),
        outputs=(("tile", jnp.bfloat16), ("row", jnp.float32)),
        batched=(False, True, True),
        epilogue=epilogue,
        operands="bf16",
    )
    as_bf16 = _reference(image.astype(jnp.bfloat16), kernel.astype(jnp.bfloat16), None)
    assert out.dtype == jnp.bfloat16 and out.shape == (3, 16, pixels) and total.shape == (3, 16, 1)
    np.testing.assert_allclose(out.astype(jnp.float32), as_bf16, rtol=1e-2, atol=5e-2)
    np.testing.assert_allclose(
        total, jnp.sum(as_bf16 * weights, axis=2, keepdims=True), rtol=1e-4, atol=1e-3
    )


def test_a_bf16_image_keeps_its_dtype_and_the_channel_alignment_of_bf16(monkeypatch):
    monkeypatch.setattr(conv, "BLOCK_ROWS", 16)
    image, kernel = _random(2, 4, 8, 8, dtype=jnp.bfloat16), _random(32, 4, 3, 3, seed=1)
    kernel = kernel.astype(jnp.bfloat16)

    def epilogue(acc, out_ref, *, tm, tn):
        assert tm == 16  # bf16 blocks of output channels: 16 sublanes, a multiple of row_align
        out_ref[...] = acc.astype(out_ref.dtype)

    got = _run(
        image,
        kernel,
        roles=(),
        outputs=(("tile", jnp.bfloat16),),
        batched=(True,),
        epilogue=epilogue,
        row_align=16,
    )
    want = _reference(image, kernel, None)
    np.testing.assert_allclose(got.astype(jnp.float32), want, rtol=2e-2, atol=1e-1)


def test_each_row_of_taps_is_one_matmul_over_every_column_shifted_copy():
    # 3x3 taps over 64 channels: three matmuls of depth 192 (a 128-wide MXU three-quarters
    # full), not nine of depth 64 (half full)
    image, kernel = _random(1, 64, 10, 10), _random(8, 64, 3, 3, seed=1)

    def epilogue(acc, out_ref, *, tm, tn):
        out_ref[...] = acc

    stage = {"roles": (), "outputs": (("tile", jnp.float32),), "batched": (True,)}
    stage["epilogue"] = epilogue
    program = jax.make_jaxpr(lambda i, k: conv._conv_stage(i, k, **stage))(image, kernel)
    (call,) = [e for e in program.eqns if e.primitive.name == "pallas_call"]
    dots = [e for e in call.params["jaxpr"].eqns if e.primitive.name == "dot_general"]
    assert [d.invars[0].aval.shape for d in dots] == [(8, 192)] * 3
    got = _run(image, kernel, **stage)
    np.testing.assert_allclose(got, _reference(image, kernel), rtol=1e-4, atol=1e-3)
