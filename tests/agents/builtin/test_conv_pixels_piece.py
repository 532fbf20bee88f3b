"""The pixels-major convolution (pieces/conv_pixels.py) run directly in TPU interpret mode at
small shapes, against jax's own convolution: a bias and ReLU at full f32 precision over several
blocks of output rows and columns, bf16 operands with a rectangular kernel and two results, too
few channels to stack (filled with zero channels), a batch that is not a whole lane tile, three
bf16 passes, a bf16 image, and a result per pixel beside the tile; an operand per row or a
result per channel refused; its footprint fits the budget; at 18k's shapes it compiles for a v5e
into a kernel whose result reaches the program as a bitcast, its image laid out by a kernel of
the piece's own (tested here exactly against jnp.transpose in interpret mode), XLA's transpose
left to shapes that kernel does not take."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import conv_pixels
from maxkernel_tui.kernels import aot

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")


def _random(*shape, dtype=jnp.float32, seed=0):
    return jax.random.normal(jax.random.key(seed), shape, dtype)


def _run(*args, **kwargs):
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        return jax.block_until_ready(conv_pixels._pixels_major_conv_stage(*args, **kwargs))


def _reference(image, kernel):
    """jax's convolution as the piece lays it out: (out height * out width * batch, channels)."""
    out = jax.lax.conv_general_dilated(
        image.astype(jnp.float32),
        kernel.astype(jnp.float32),
        (1, 1),
        "VALID",
        precision=jax.lax.Precision.HIGHEST,
    )
    return jnp.transpose(out, (2, 3, 0, 1)).reshape(-1, out.shape[1])


def _bias_relu(acc, bias_ref, out_ref, *, tm, tn):
    out_ref[...] = jnp.maximum(acc + bias_ref[...], 0.0).astype(out_ref.dtype)


@pytest.mark.slow
def test_a_bias_and_relu_over_several_blocks_of_rows_and_columns(monkeypatch):
    # 34 x 18 output pixels: blocks of at most 16 rows and columns leave several of each
    image, kernel, bias = _random(8, 16, 36, 20), _random(24, 16, 3, 3, seed=1), _random(1, 24)
    got = _run(
        image,
        kernel,
        bias,
        roles=("col",),
        outputs=(("tile", jnp.float32),),
        epilogue=_bias_relu,
        operands="highest",
        chunk_rows=40,  # five pixels of eight images a chunk: a short last chunk per block
    )
    assert got.shape == (34 * 18 * 8, 24)
    np.testing.assert_allclose(got, jax.nn.relu(_reference(image, kernel) + bias), atol=1e-4)


@pytest.mark.slow
def test_a_rectangular_kernel_in_bf16_with_a_scalar_and_two_results():
    image, kernel = _random(16, 32, 7, 12), _random(8, 32, 2, 5, seed=1)
    scale = jnp.full((1, 1), 0.5)

    def epilogue(acc, scale_ref, out_ref, doubled_ref, *, tm, tn):
        assert tn == 8
        out_ref[...] = (acc * scale_ref[...]).astype(out_ref.dtype)
        doubled_ref[...] = acc + acc

    out, doubled = _run(
        image,
        kernel,
        scale,
        roles=("scalar",),
        outputs=(("tile", jnp.bfloat16), ("tile", jnp.float32)),
        epilogue=epilogue,
        operands="bf16",
    )
    rounded = _reference(image.astype(jnp.bfloat16), kernel.astype(jnp.bfloat16))
    assert out.dtype == jnp.bfloat16 and out.shape == (6 * 8 * 16, 8)
    np.testing.assert_allclose(out.astype(jnp.float32), 0.5 * rounded, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(doubled, 2 * rounded, rtol=1e-4, atol=1e-3)


@pytest.mark.slow
def test_three_input_channels_and_a_batch_of_three_in_three_passes():
    # channels filled to a sublane tile with zeros; three images: lanes far from full
    image, kernel, bias = _random(3, 3, 9, 9), _random(16, 3, 3, 3, seed=1), _random(1, 16)
    got = _run(
        image,
        kernel,
        bias,
        roles=("col",),
        outputs=(("tile", jnp.float32),),
        epilogue=_bias_relu,
        operands="bf16x3",
    )
    want = jax.nn.relu(_reference(image, kernel) + bias)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_a_bf16_image_at_mosaics_default_precision():
    image = _random(8, 16, 6, 6, dtype=jnp.bfloat16)
    kernel = _random(8, 16, 3, 3, seed=1, dtype=jnp.bfloat16)
    bias = _random(1, 8)
    got = _run(
        image, kernel, bias, roles=("col",), outputs=(("tile", jnp.float32),), epilogue=_bias_relu
    )
    np.testing.assert_allclose(
        got, jax.nn.relu(_reference(image, kernel) + bias), rtol=1e-2, atol=1e-2
    )


@pytest.mark.slow
def test_a_result_per_pixel_beside_the_tile():
    # a softmax's row statistic over every channel of each pixel: a (rows, 1) result
    image, kernel = _random(8, 16, 6, 7), _random(16, 16, 3, 3, seed=1)

    def epilogue(acc, out_ref, top_ref, *, tm, tn):
        out_ref[...] = acc
        top_ref[...] = jnp.max(acc, axis=1, keepdims=True)

    out, top = _run(
        image,
        kernel,
        roles=(),
        outputs=(("tile", jnp.float32), ("row", jnp.float32)),
        epilogue=epilogue,
        operands="highest",
    )
    want = _reference(image, kernel)
    assert top.shape == (4 * 5 * 8, 1)
    np.testing.assert_allclose(top[:, 0], want.max(axis=1), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


def test_an_operand_per_row_or_a_result_per_channel_is_refused_before_tracing():
    image, kernel = _random(8, 8, 5, 5), _random(8, 8, 3, 3, seed=1)
    with pytest.raises(ValueError, match="pixels-major"):
        conv_pixels._pixels_major_conv_stage(
            image,
            kernel,
            _random(8, 1),
            roles=("row",),
            outputs=(("tile", jnp.float32),),
            epilogue=_bias_relu,
        )
    with pytest.raises(ValueError, match="pixels-major"):
        conv_pixels._pixels_major_conv_stage(
            image, kernel, roles=(), outputs=(("col", jnp.float32),), epilogue=_bias_relu
        )


def test_the_block_shrinks_until_its_footprint_fits_and_columns_hold_whole_tiles():
    sizes = []

    def footprint(rows, cols):
        sizes.append((rows, cols))
        return rows * cols * 2**20  # 1 MiB a pixel

    rows, cols = conv_pixels._fit_pixel_block(126, 126, 128, footprint)
    assert rows * cols <= conv_pixels.VMEM_BUDGET // 2**20
    assert 126 % rows == 0 and 126 % cols == 0 and sizes[0] == (14, 14)
    # three images a pixel: a block of columns is 8 pixels' rows or the whole width
    _, cols = conv_pixels._fit_pixel_block(10, 10, 3, lambda r, c: 0)
    assert cols == 10


@pytest.mark.slow
def test_18ks_convolution_compiles_for_a_v5e_and_its_result_is_a_bitcast():
    specs = [
        jax.ShapeDtypeStruct(s, jnp.float32)
        for s in [(128, 64, 128, 128), (128, 64, 3, 3), (1, 128)]
    ]

    def program(x, w, bias):
        out = conv_pixels._pixels_major_conv_stage(
            x,
            w,
            bias,
            roles=("col",),
            outputs=(("tile", jnp.float32),),
            epilogue=_bias_relu,
            operands="bf16",
        )
        return jnp.transpose(out.reshape(126, 126, 128, 128), (2, 3, 0, 1))

    text = aot.compile_for_tpu(program, specs, aot.target_for("v5e")).as_text()
    root = re.search(r"ROOT %\S+ = f32\[128,128,126,126\]\{[^}]*\} (\w+)\(", text)
    assert root is not None and root.group(1) == "bitcast"
    # the image laid out by the piece's own kernel, the convolution by another: no XLA copy of
    # the image between them (XLA's transposing copy took 1.58 ms of 18k's 3.70 on a v5e)
    assert text.count('custom_call_target="tpu_custom_call"') == 2
    assert not re.search(r"= \w+\[128,64,128,128\]\{[^}]*\} copy\(", text)


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((128, 16, 8, 128), jnp.bfloat16),  # one block, the cast made in the kernel
        ((128, 32, 16, 128), jnp.bfloat16),  # two blocks of rows by two groups of channels
        ((128, 24, 8, 256), jnp.float32),  # f32 kept, three groups of 8 channels, two lane tiles
        ((128, 16, 8, 128), "bf16 in"),  # an image that is bf16 already (packed rows)
    ],
)
def test_the_image_is_laid_out_pixels_first_by_its_own_kernel(shape, dtype):
    image = _random(*shape)
    if dtype == "bf16 in":
        image, dtype = image.astype(jnp.bfloat16), jnp.bfloat16
    program = jax.make_jaxpr(lambda x: conv_pixels._pixels_first(x, dtype))(image)
    assert [e.primitive.name for e in program.eqns] == ["pallas_call"]
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        got = jax.block_until_ready(conv_pixels._pixels_first(image, dtype))
    want = jnp.transpose(image.astype(dtype), (2, 3, 1, 0))
    assert got.dtype == dtype
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


@pytest.mark.parametrize(
    "shape",
    [
        (8, 16, 8, 128),  # a batch that is not a whole lane tile
        (128, 16, 8, 126),  # nor a width
        (128, 16, 12, 128),  # a height that is not whole blocks of rows
        (128, 12, 8, 128),  # channels in no group of whole bf16 sublane tiles
        (512, 16, 8, 512),  # no block fits VMEM
    ],
)
def test_other_shapes_are_laid_out_by_xla(shape):
    image = jax.ShapeDtypeStruct(shape, jnp.float32)
    program = jax.make_jaxpr(lambda x: conv_pixels._pixels_first(x, jnp.bfloat16))(image)
    names = [e.primitive.name for e in program.eqns]
    assert "pallas_call" not in names and "transpose" in names
