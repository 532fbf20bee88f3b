"""The row-wise stage over images (pieces/rowwise.py with `batched`), run directly in TPU
interpret mode at small shapes against jnp: batch statistics (per-row sums over every image and
column, the images innermost and 'arbitrary'), then a per-image normalisation by them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import rowwise

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
pytestmark = pytest.mark.slow  # interpret mode: seconds per kernel on a busy 2-core machine


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 8 rows: several row blocks per image."""
    monkeypatch.setattr(rowwise, "BLOCK_ROWS", 8)


def _sums_body(tile_ref, out_ref, acc_ref, *, tm, tn):
    acc_ref[...] = acc_ref[...] + jnp.sum(tile_ref[...], axis=1, keepdims=True)

    def finish():
        out_ref[...] = acc_ref[...] / 3.0

    return finish


def _centre_body(tile_ref, mean_ref, scale_ref, out_ref, *, tm, tn):
    out_ref[...] = (tile_ref[...] - mean_ref[...]) * scale_ref[...]


def test_statistics_over_every_image_then_each_image_normalised():
    images = jax.random.normal(jax.random.key(0), (3, 24, 200), jnp.float32)  # 3 x 24 channels
    scale = jax.random.normal(jax.random.key(1), (24, 1), jnp.float32)
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        mean = rowwise._rowwise_stage(
            images,
            rows=24,
            cols=200,
            roles=("tile",),
            outputs=(("row", jnp.float32),),
            body=_sums_body,
            accumulators=(("row", 0.0),),
            batched=(True, False),
        )
        centred = rowwise._rowwise_stage(
            images,
            mean,
            scale,
            rows=24,
            cols=200,
            roles=("tile", "row", "row"),
            outputs=(("tile", jnp.float32),),
            body=_centre_body,
            batched=(True, False, False, True),
        )
    expected_mean = images.sum(axis=(0, 2))[:, None] / 3.0
    np.testing.assert_allclose(mean, expected_mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(centred, (images - expected_mean) * scale, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("height", "width"), [(10, 20), (2, 130)])
def test_a_result_returned_as_images_is_written_as_they_lie(height, width):
    # (3 images, 24 rows, height * width pixels) in, (3, 24, height, width) out: each image's
    # rows of pixels written from the flat block a row at a time (row widths of 20 lanes and of
    # 130, past one lane tile); a per-row result beside it stays as it was
    images = jax.random.normal(jax.random.key(0), (3, 24, height * width), jnp.float32)
    scale = jax.random.normal(jax.random.key(1), (24, 1), jnp.float32)

    def body(tile_ref, scale_ref, out_ref, peak_ref, *, tm, tn):
        out_ref[...] = tile_ref[...] * scale_ref[...]
        peak_ref[...] = jnp.max(tile_ref[...], axis=1, keepdims=True)

    stage = {
        "rows": 24,
        "cols": height * width,
        "roles": ("tile", "row"),
        "outputs": (("tile", jnp.float32), ("row", jnp.float32)),
        "body": body,
        "batched": (True, False, True, True),
        "image_results": (height, width),
    }
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        scaled, peak = rowwise._rowwise_stage(images, scale, **stage)
    assert scaled.shape == (3, 24, height, width)
    want = (images * scale).reshape(3, 24, height, width)
    np.testing.assert_allclose(scaled, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(peak, images.max(axis=2, keepdims=True), rtol=1e-6)
    program = jax.make_jaxpr(lambda i, s: rowwise._rowwise_stage(i, s, **stage))(images, scale)
    assert not [e for e in program.eqns if e.primitive.name in ("reshape", "transpose")]
