"""The 3-D convolution stage (pieces/conv_volume.py) run directly in TPU interpret mode at small
shapes, against jax's own convolution: a per-channel bias over several blocks of output channels
with a kernel of unequal taps, two results (one bf16) with a scalar operand and bf16 operands,
a kernel one plane deep and a volume one output plane deep, channels too few to stack; and the
image copied into VMEM by the kernel, never shifted by XLA outside it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import conv_volume
from maxkernel_tui.kernels import aot
from maxkernel_tui.kernels.perf.pallas_analysis import analyze

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
pytestmark = pytest.mark.slow  # interpret mode: seconds per kernel on a busy 2-core machine


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 8 output channels: several channel blocks per image."""
    monkeypatch.setattr(conv_volume, "BLOCK_ROWS", 8)


def _random(*shape, dtype=jnp.float32, seed=0):
    return jax.random.normal(jax.random.key(seed), shape, dtype)


def _run(*args, **kwargs):
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        return jax.block_until_ready(conv_volume._volume_conv_stage(*args, **kwargs))


def _reference(image, kernel, precision=jax.lax.Precision.HIGHEST):
    out = jax.lax.conv_general_dilated(
        image, kernel, (1, 1, 1), "VALID", precision=precision, preferred_element_type=jnp.float32
    )
    return out.reshape(out.shape[0], out.shape[1], -1)  # (batch, channels, voxels)


def _bias_tanh(acc, bias_ref, out_ref, *, tm, tn):
    out_ref[...] = jnp.tanh(0.1 * (acc + bias_ref[...]))


def test_a_bias_over_several_channel_blocks_with_unequal_taps_matches_the_convolution():
    image, kernel = _random(2, 8, 6, 7, 9), _random(16, 8, 3, 2, 4, seed=1)
    bias = _random(16, 1, seed=2)
    got = _run(
        image,
        kernel,
        bias,
        roles=("row",),
        outputs=(("tile", jnp.float32),),
        batched=(False, True),
        epilogue=_bias_tanh,
        operands="highest",
    )
    want = jnp.tanh(0.1 * (_reference(image, kernel) + bias))
    assert got.shape == (2, 16, 4 * 6 * 6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_two_results_one_bf16_with_a_scalar_operand_and_bf16_operands():
    image, kernel = _random(3, 16, 5, 6, 6), _random(8, 16, 2, 3, 3, seed=1)
    scale = jnp.full((1, 1), 0.5, jnp.float32)
    seen = []

    def epilogue(acc, scale_ref, out_ref, half_ref, *, tm, tn):
        seen.append((tm, tn))
        out_ref[...] = acc
        half_ref[...] = (acc * scale_ref[...]).astype(half_ref.dtype)

    out, half = _run(
        image,
        kernel,
        scale,
        roles=("scalar",),
        outputs=(("tile", jnp.float32), ("tile", jnp.bfloat16)),
        batched=(False, True, True),
        epilogue=epilogue,
        operands="bf16",
    )
    assert set(seen) == {(8, 4 * 4)}  # one output plane of 4 x 4 pixels at a time
    as_bf16 = _reference(image.astype(jnp.bfloat16), kernel.astype(jnp.bfloat16), None)
    assert half.dtype == jnp.bfloat16 and half.shape == (3, 8, 4 * 4 * 4)
    np.testing.assert_allclose(out, as_bf16, rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(half.astype(jnp.float32), 0.5 * as_bf16, rtol=1e-2, atol=5e-2)


def test_a_kernel_one_plane_deep_and_a_volume_one_output_plane_deep():
    # 6 channels stack into no whole sublane tile: one matmul per tap
    flat = _random(2, 6, 4, 5, 7), _random(8, 6, 1, 3, 2, seed=1)
    deep = _random(1, 6, 3, 5, 7, seed=2), _random(8, 6, 3, 2, 2, seed=3)
    copy = {
        "roles": (),
        "outputs": (("tile", jnp.float32),),
        "batched": (True,),
        "operands": "highest",
    }

    def epilogue(acc, out_ref, *, tm, tn):
        out_ref[...] = acc

    for image, kernel in (flat, deep):
        got = _run(image, kernel, epilogue=epilogue, **copy)
        np.testing.assert_allclose(got, _reference(image, kernel), rtol=1e-5, atol=1e-4)


def test_the_image_is_copied_into_vmem_by_the_kernel_with_no_shifted_copies_made_outside_it():
    image, kernel = _random(2, 8, 6, 10, 12), _random(16, 8, 3, 3, 3, seed=1)
    bias = _random(16, 1, seed=2)

    def stage(image, kernel, bias):
        return conv_volume._volume_conv_stage(
            image,
            kernel,
            bias,
            roles=("row",),
            outputs=(("tile", jnp.float32),),
            batched=(False, True),
            epilogue=_bias_tanh,
        )

    program = jax.make_jaxpr(stage)(image, kernel, bias)
    assert not [e for e in program.eqns if e.primitive.name in ("concatenate", "slice", "pad")]
    (call,) = [e for e in program.eqns if e.primitive.name == "pallas_call"]
    assert call.invars[0].aval.shape == (2, 8, 6, 10 * 12)  # the whole image, left in HBM
    (analysis,) = analyze(program)
    assert analysis.grid == [2, 2, 4]  # images, blocks of 8 output channels, output planes
    # a step copies one new input plane and writes one plane back; the first copies three
    assert 2 <= analysis.dma_starts_per_step < 3


def test_the_kernel_compiles_for_v5e_with_planes_whose_pixels_fill_no_whole_lane_tile():
    image = jax.ShapeDtypeStruct((2, 16, 5, 8, 40), jnp.float32)
    kernel = jax.ShapeDtypeStruct((24, 16, 3, 3, 3), jnp.float32)
    bias = jax.ShapeDtypeStruct((24, 1), jnp.float32)

    def stage(image, kernel, bias):
        return conv_volume._volume_conv_stage(
            image,
            kernel,
            bias,
            roles=("row",),
            outputs=(("tile", jnp.float32),),
            batched=(False, True),
            epilogue=_bias_tanh,
            operands="bf16",
        )

    compiled = aot.compile_for_tpu(stage, [image, kernel, bias], aot.target_for("v5e"))
    assert compiled.cost_analysis() is not None
