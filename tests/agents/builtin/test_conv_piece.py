"""The convolution stage's module (pieces/conv.py) run directly in TPU interpret mode at small
shapes, against jax's own convolution: several blocks of output channels with a per-channel
bias and ReLU at full f32 precision, a non-square image and kernel with bf16 operands, a
per-pixel operand shared by every image and a result per channel, a bf16 image, several chunks
of output rows, taps one column wide, too few channels to stack (filled with zero channels),
and an instance norm run on
blocks of rows; and the image read from HBM once, its taps formed in the kernel."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import conv
from maxkernel_tui.kernels import aot
from maxkernel_tui.kernels.perf.outside import outside_traffic
from maxkernel_tui.kernels.perf.pallas_analysis import analyze

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


def _dots(image, kernel, **stage):
    program = jax.make_jaxpr(lambda i, k: conv._conv_stage(i, k, **stage))(image, kernel)
    (call,) = [e for e in program.eqns if e.primitive.name == "pallas_call"]
    dots = [e for e in call.params["jaxpr"].eqns if e.primitive.name == "dot_general"]
    return program, call, dots


def _copy_out(acc, out_ref, *, tm, tn):
    out_ref[...] = acc


COPY = {"roles": (), "outputs": (("tile", jnp.float32),), "batched": (True,), "epilogue": _copy_out}


def test_each_chunk_of_output_rows_is_one_matmul_over_every_tap_stacked_along_the_channels():
    # 3x3 taps over 64 channels: one matmul of depth 576 per chunk (a 128-wide MXU nine tenths
    # full), not nine of depth 64 (half full); chunks of 3 output rows of 10 pixels: 3, 3, 2
    image, kernel = _random(1, 64, 10, 10), _random(8, 64, 3, 3, seed=1)
    stage = {**COPY, "chunk_pixels": 30}
    _, _, dots = _dots(image, kernel, **stage)
    assert [d.invars[0].aval.shape for d in dots] == [(8, 576)] * 3
    # a chunk spans its rows laid out 10 pixels a row, through its last output pixel
    assert [d.invars[1].aval.shape for d in dots] == [(576, 28), (576, 28), (576, 18)]
    got = _run(image, kernel, **stage)
    np.testing.assert_allclose(got, _reference(image, kernel), rtol=1e-4, atol=1e-3)


def test_the_image_is_read_from_hbm_once_with_no_shifted_copies_made_outside_the_kernel():
    image, kernel = _random(3, 8, 12, 16), _random(16, 8, 3, 3, seed=1)
    program, call, _ = _dots(image, kernel, **COPY)
    # rows of 16 lanes: XLA flattens the image's pixels (one copy) and lays the weights out tap
    # by tap; nothing else as large as the image
    assert not [e for e in program.eqns if e.primitive.name in ("concatenate", "slice")]
    assert call.invars[0].aval.shape == (3, 8, 12 * 16)
    (analysis,) = analyze(program)
    image_block = analysis.blocks[0]
    assert image_block.shape == [8, 12 * 16]  # one whole image, fetched once per image
    assert image_block.bytes * image_block.fetches == image.size * 4


@pytest.mark.parametrize("channels", [8, 3])
def test_rows_of_whole_lane_tiles_are_flattened_in_vmem_with_no_copy_outside(channels):
    # rows of 256 lanes: the kernel reads the image as it lies in HBM (a unit plane axis added:
    # a bitcast) and flattens its rows in VMEM, filling 3 channels to 8 there
    image, kernel = _random(2, channels, 5, 256), _random(8, channels, 3, 3, seed=1)
    program, call, dots = _dots(image, kernel, **COPY)
    assert call.invars[0].aval.shape == (2, channels, 1, 5, 256)
    assert [d.invars[0].aval.shape for d in dots] == [(8, 72)]
    assert outside_traffic(program).bytes < image.size * 4  # the taps laid out, no image copy
    got = _run(image, kernel, **COPY)
    np.testing.assert_allclose(got, _reference(image, kernel), rtol=1e-4, atol=1e-3)


def test_taps_one_column_wide_keep_whole_rows_and_too_few_channels_are_filled_to_a_tile():
    # 6 channels fill no whole sublane tile of f32: two zero channels make them 8, so the two
    # taps stack into one matmul of depth 16 (one per tap, each of depth 6, fills 6 of the MXU's
    # 128 rows: 25k's estimate was 4.36 ms that way, 0.62 ms filled)
    image, kernel = _random(2, 6, 7, 9), _random(8, 6, 2, 1, seed=1)
    _, call, dots = _dots(image, kernel, **COPY)
    assert [d.invars[0].aval.shape for d in dots] == [(8, 16)]
    assert call.invars[0].aval.shape == (2, 8, 7 * 9)
    got = _run(image, kernel, **COPY)
    np.testing.assert_allclose(got, _reference(image, kernel), rtol=1e-4, atol=1e-3)


def test_an_epilogue_over_every_pixel_runs_on_blocks_of_rows_when_its_temporaries_need_less_vmem(
    monkeypatch,
):
    # the budget fits the sum of 32 channels and the epilogue's temporaries on 8 of them: the
    # epilogue (an instance norm: statistics over every pixel of a channel) sees blocks of 8
    monkeypatch.setattr(conv, "BLOCK_ROWS", 32)
    image, kernel = _random(2, 8, 12, 12), _random(32, 8, 3, 3, seed=1)
    scale = _random(32, 1, seed=2)
    seen = []

    def epilogue(acc, scale_ref, out_ref, mean_ref, *, tm, tn):
        seen.append((tm, tn))
        mean = jnp.mean(acc, axis=1, keepdims=True)
        centred = acc - mean
        variance = jnp.mean(centred * centred, axis=1, keepdims=True)
        out_ref[...] = centred / jnp.sqrt(variance + 1e-5) * scale_ref[...]
        mean_ref[...] = mean

    pixels = 10 * 10
    fits = 2 * 4 * (8 * 256 + 32 * 128 + 32 * 128 + 32 * 128 + 32 * 128) + 32 * 128 * 4
    fits += 4 * (72 * 128 + 32 * 128) + 2 * 8 * 128 * 4  # a chunk, two temporaries on 8 rows
    monkeypatch.setattr(conv, "VMEM_BUDGET", fits)
    out, mean = _run(
        image,
        kernel,
        scale,
        roles=("row",),
        outputs=(("tile", jnp.float32), ("row", jnp.float32)),
        batched=(False, True, True),
        epilogue=epilogue,
        operands="highest",
    )
    assert set(seen) == {(8, pixels)}  # the epilogue on 8 channels at a time
    program = jax.make_jaxpr(
        lambda i, k, s: conv._conv_stage(
            i,
            k,
            s,
            roles=("row",),
            outputs=(("tile", jnp.float32), ("row", jnp.float32)),
            batched=(False, True, True),
            epilogue=epilogue,
        )
    )(image, kernel, scale)
    (call,) = [e for e in program.eqns if e.primitive.name == "pallas_call"]
    assert tuple(call.params["grid_mapping"].grid) == (2, 1)  # the 32 channels in one block
    full = _reference(image, kernel)
    want_mean = jnp.mean(full, axis=2, keepdims=True)
    centred = full - want_mean
    want = centred / jnp.sqrt(jnp.mean(centred**2, axis=2, keepdims=True) + 1e-5) * scale
    np.testing.assert_allclose(mean, want_mean, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)


def test_the_kernel_compiles_for_v5e_with_rows_of_pixels_cut_at_unaligned_lane_offsets():
    # 50 pixels a row (48 kept), chunks of 5 rows: every store of a row lands at an offset no
    # multiple of 128, as 126 of 128 do at production shapes
    image = jax.ShapeDtypeStruct((2, 16, 40, 50), jnp.float32)
    kernel = jax.ShapeDtypeStruct((32, 16, 3, 3), jnp.float32)
    bias = jax.ShapeDtypeStruct((32, 1), jnp.float32)

    def epilogue(acc, bias_ref, out_ref, *, tm, tn):
        out_ref[...] = jnp.maximum(acc + bias_ref[...], 0.0)

    def stage(image, kernel, bias):
        return conv._conv_stage(
            image,
            kernel,
            bias,
            roles=("row",),
            outputs=(("tile", jnp.float32),),
            batched=(False, True),
            epilogue=epilogue,
            operands="bf16",
            chunk_pixels=250,
        )

    compiled = aot.compile_for_tpu(stage, [image, kernel, bias], aot.target_for("v5e"))
    assert compiled.cost_analysis() is not None


@pytest.mark.parametrize("operands", [None, "bf16", "bf16x3"])
def test_a_volume_forms_each_input_planes_taps_once_for_every_output_plane_reading_it(operands):
    # 5 planes, 3x3x3 taps: output plane d sums plane taps dd = 0..2 of input plane d + dd, so
    # input plane 2 is read by all three output planes; its nine lane-shifted slices are made
    # once (5 planes x 9 slices), not once per reader (3 x 27)
    image, kernel = _random(2, 3, 5, 6, 10), _random(8, 3, 3, 3, 3, seed=1)
    _, call, dots = _dots(image, kernel, **COPY, operands=operands)
    passes = 3 if operands == "bf16x3" else 1
    assert len(dots) == 3 * 3 * passes  # output planes x plane taps (x passes)
    assert {d.invars[1].aval.shape for d in dots} == {(72, 3 * 10 + 8)}
    body = call.params["jaxpr"]
    slices = [
        e for e in body.eqns if e.primitive.name == "get" and len(e.outvars[0].aval.shape) == 2
    ]
    assert len([s for s in slices if s.outvars[0].aval.shape == (8, 38)]) == 5 * 9
    got = _run(image, kernel, **COPY, operands=operands)
    want = jax.lax.conv_general_dilated(
        image, kernel, (1, 1, 1), "VALID", precision=jax.lax.Precision.HIGHEST
    ).reshape(2, 8, -1)
    tolerance = 5e-2 if operands == "bf16" else 1e-3
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
