"""The convolution stage (pieces/conv.py) with an epilogue over whole images, run directly in
TPU interpret mode at small shapes against jnp: a group norm over groups of adjacent output
channels (pieces/groups.py's row-group totals), then a logsumexp across every channel, which
needs one block to hold all channels (`full_rows`); the same piece on whole volumes (3-D, 3
input channels) with a group norm over every plane, then one mean per image (25k's form); and
the row-group totals alone, on groups that are not a power of two."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import conv, groups

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
pytestmark = pytest.mark.slow  # interpret mode: seconds per kernel on a busy 2-core machine


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """A preferred block of 8 channels, fewer than the stage has: `full_rows` must override it."""
    monkeypatch.setattr(conv, "BLOCK_ROWS", 8)


def _random(*shape, seed=0):
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32)


def _group_norm_lse_epilogue(acc, out_ref, *, tm, tn, width):
    """Group statistics per image over `width` adjacent channels, then logsumexp over channels."""
    count = width * tn
    mean = groups._row_group_totals(jnp.sum(acc, axis=1, keepdims=True), width) / count
    centred = acc - mean
    var = groups._row_group_totals(jnp.sum(centred * centred, axis=1, keepdims=True), width)
    normed = jnp.tanh(centred * jax.lax.rsqrt(var / count + 1e-5)) + acc
    top = jnp.max(normed, axis=0, keepdims=True)
    out_ref[...] = top + jnp.log(jnp.sum(jnp.exp(normed - top), axis=0, keepdims=True))


def _expected(image, kernel, width):
    out = jax.lax.conv_general_dilated(
        image, kernel, (1, 1), "VALID", precision=jax.lax.Precision.HIGHEST
    )
    n, c, h, w = out.shape
    split = out.reshape(n, c // width, width, h, w)
    mean = split.mean(axis=(2, 3, 4), keepdims=True)
    var = split.var(axis=(2, 3, 4), keepdims=True)
    normed = jnp.tanh((split - mean) / jnp.sqrt(var + 1e-5)).reshape(out.shape) + out
    return jax.nn.logsumexp(normed, axis=1).reshape(n, 1, h * w)


@pytest.mark.parametrize("width", [4, 3])
def test_a_group_norm_then_a_logsumexp_over_every_channel(width):
    channels = 8 * width  # 8 groups: more channels than the preferred block of 8
    image, kernel = _random(2, 5, 9, 12), _random(channels, 5, 3, 3, seed=1)
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        got = conv._conv_stage(
            image,
            kernel,
            roles=(),
            outputs=(("col", jnp.float32),),
            batched=(True,),
            epilogue=functools.partial(_group_norm_lse_epilogue, width=width),
            operands="highest",
            full_rows=True,
            row_align=np.lcm(8, width),
        )
    np.testing.assert_allclose(got, _expected(image, kernel, width), rtol=1e-4, atol=1e-4)


def _group_norm_mean_epilogue(acc, gamma_ref, out_ref, *, tm, tn, width):
    """Group statistics per image over `width` adjacent channels and every voxel, the scale per
    channel, then the image's mean."""
    count = width * tn
    mean = groups._row_group_totals(jnp.sum(acc, axis=1, keepdims=True), width) / count
    centred = acc - mean
    var = groups._row_group_totals(jnp.sum(centred * centred, axis=1, keepdims=True), width)
    normed = centred / jnp.sqrt(var / count + 1e-5) * gamma_ref[...] + 0.25 * acc
    out_ref[...] = jnp.sum(normed, axis=(0, 1), keepdims=True) / (tm * tn)


@pytest.mark.parametrize("taps", [(3, 3, 3), (2, 1, 3)])
def test_a_group_norm_over_whole_volumes_then_one_mean_per_image(taps):
    width, channels = 3, 24  # 8 groups of 3, every channel in one block
    image, kernel = _random(2, 3, 6, 7, 9), _random(channels, 3, *taps, seed=1)
    gamma = 1 + _random(channels, 1, seed=2)
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        got = conv._conv_stage(
            image,
            kernel,
            gamma,
            roles=("row",),
            outputs=(("scalar", jnp.float32),),
            batched=(False, True),
            epilogue=functools.partial(_group_norm_mean_epilogue, width=width),
            operands="highest",
            full_rows=True,
            row_align=np.lcm(8, width),
        )
    out = jax.lax.conv_general_dilated(
        image, kernel, (1, 1, 1), "VALID", precision=jax.lax.Precision.HIGHEST
    )
    n, c, *voxels = out.shape
    split = out.reshape(n, c // width, width, *voxels)
    mean = split.mean(axis=(2, 3, 4, 5), keepdims=True)
    var = split.var(axis=(2, 3, 4, 5), keepdims=True)
    normed = ((split - mean) / jnp.sqrt(var + 1e-5)).reshape(out.shape)
    normed = normed * gamma.reshape(1, c, 1, 1, 1) + 0.25 * out
    assert got.shape == (2, 1, 1)
    np.testing.assert_allclose(got[:, 0, 0], normed.mean(axis=(1, 2, 3, 4)), rtol=1e-4, atol=1e-5)


def test_row_group_totals_give_every_row_its_groups_sum():
    column = _random(24, 1, seed=3)

    def kernel(column_ref, out_ref):
        out_ref[...] = groups._row_group_totals(column_ref[...], 3)

    with pltpu.force_tpu_interpret_mode(INTERPRET):
        got = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((24, 1), jnp.float32))(column)
    sums = np.asarray(column).reshape(8, 3).sum(axis=1)
    np.testing.assert_allclose(np.asarray(got)[:, 0], np.repeat(sums, 3), rtol=1e-6, atol=1e-6)
