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
