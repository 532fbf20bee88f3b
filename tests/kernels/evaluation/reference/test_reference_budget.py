"""The reference worker computes the sample's elements by regions when the regions' cost fits the
CPU budget, whatever the whole reference's (2p's GQA attention: 4.4e12 flops whole, over the
4e12 budget; its sample's rows a small share of that), and says the regions' cost when they do
not fit either. In-process jax, small shapes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from maxkernel_tui.kernels.evaluation.reference import worker as reference_worker
from maxkernel_tui.kernels.evaluation.work.jaxpr_work import measure

pytestmark = pytest.mark.slow  # jax in this process: a few seconds


def _grouped_attention(q, k):  # q (s, 8, d), k (s, 2, d): query head h uses kv head h // 4
    logits = jnp.einsum("skgd,tkd->kgst", q.reshape(64, 2, 4, 16), k)
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("kgst,tkd->skgd", probs, k).reshape(64, 8, 16)


def test_the_sample_is_computed_by_regions_when_only_they_fit_the_budget(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in [(64, 8, 16), (64, 2, 16)]]
    traced = jax.make_jaxpr(_grouped_attention)(*inputs)
    whole = np.asarray(_grouped_attention(*inputs))
    grid = np.arange(whole.size).reshape(whole.shape)
    indices = np.concatenate([grid[8:16, 4:6].reshape(-1), grid[40:48, 0:1].reshape(-1)])
    np.save(tmp_path / "indices.npy", indices)
    files = [str(tmp_path / "indices.npy")]
    whole_flops = measure(traced).xla_flops
    monkeypatch.setattr(reference_worker, "REFERENCE_FLOPS_BUDGET", whole_flops / 4)
    with jax.default_matmul_precision("highest"):
        (found,) = reference_worker._by_regions(traced, inputs, files, whole_flops)
    np.testing.assert_allclose(found, whole.reshape(-1)[indices], rtol=1e-5, atol=1e-6)

    monkeypatch.setattr(reference_worker, "REFERENCE_FLOPS_BUDGET", whole_flops / 100)
    why = reference_worker._by_regions(traced, inputs, files, whole_flops)
    assert isinstance(why, str) and "by the sample's regions it needs" in why


def test_boxes_that_need_the_whole_reference_leave_it_to_be_computed_whole_once(tmp_path):
    """A global statistic (39k's average pool, 13p's mean loss): each box reads every row, so
    twelve boxes cost twelve wholes; the whole reference is computed once instead, and kept."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((32, 16), np.float32), rng.standard_normal((16, 8), np.float32)

    def normalised(x, w):  # every element over the sum of all: each box needs all of x @ w
        return (x @ w) / jnp.sum(x @ w)

    traced = jax.make_jaxpr(normalised)(x, w)
    # four boxes of one element, apart along both dimensions (boxes of one row are merged)
    np.save(tmp_path / "indices.npy", np.array([0, 9, 18, 27]))
    files = [str(tmp_path / "indices.npy")]
    why = reference_worker._by_regions(traced, [x, w], files, measure(traced).xla_flops)
    assert isinstance(why, str) and "by the sample's regions it needs" in why
    (found,) = reference_worker._by_regions(traced, [x, w], files, 0.0)  # were the whole free
    np.testing.assert_allclose(
        found, np.asarray(normalised(x, w)).reshape(-1)[[0, 9, 18, 27]], rtol=1e-4
    )


def test_an_operation_not_followed_leaves_the_whole_reference(tmp_path):
    x = np.ones((8, 8), np.float32)
    traced = jax.make_jaxpr(lambda x: jnp.zeros((8, 8)).at[jnp.arange(8) % 3].add(x))(x)
    np.save(tmp_path / "indices.npy", np.arange(3))
    why = reference_worker._by_regions(traced, [x], [str(tmp_path / "indices.npy")], 0.0)
    assert isinstance(why, str) and "scatter-add" in why


def test_boxes_of_one_row_share_what_they_read_once_merged(tmp_path, monkeypatch):
    """9p: the sampled corner blocks of one row of an MLP's output each recomputed the same
    hidden rows (two boxes, twice the flops); merged, the row's hidden layer is computed once and
    the sample fits the budget that the separate boxes were over."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 256), np.float32)
    up = rng.standard_normal((256, 256), np.float32) / 16
    down = rng.standard_normal((256, 64), np.float32) / 16

    def mlp(x, up, down):
        return jnp.maximum(x @ up, 0.0) @ down

    traced = jax.make_jaxpr(mlp)(x, up, down)
    grid = np.arange(64 * 64).reshape(64, 64)
    indices = np.concatenate([grid[0:8, c].reshape(-1) for c in (slice(0, 8), slice(56, 64))])
    np.save(tmp_path / "indices.npy", indices)
    files = [str(tmp_path / "indices.npy")]
    whole_flops = measure(traced).xla_flops
    apart = 2 * (2 * 8 * 256 * 256 + 2 * 8 * 256 * 8)  # each box: its rows' hidden layer
    monkeypatch.setattr(reference_worker, "REFERENCE_FLOPS_BUDGET", 0.75 * apart)
    with jax.default_matmul_precision("highest"):
        (found,) = reference_worker._by_regions(traced, [x, up, down], files, whole_flops)
    np.testing.assert_allclose(
        found, np.asarray(mlp(x, up, down)).reshape(-1)[indices], rtol=1e-4, atol=1e-4
    )
