"""The model with a kernel's scalar-prefetch values at the inputs it estimates for
(perf/flat_program.py, kernels/prefetch_values.py): block fetches counted from the index maps
evaluated on the prefetched tables (a block is fetched again only where its index changes), and
`pl.when` on prefetched values taking its share of steps, where without them every block is
fetched and every branch runs at every step (an upper bound, said). The grouped matmul's
padding steps, past its real work items, then fetch and compute nothing. In-process tracing,
numpy and small XLA slices (seconds)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import grouped
from maxkernel_tui.kernels.perf.flat_program import (
    NotFlat,
    flatten,
    scalar_inputs,
    scalar_operands,
)
from maxkernel_tui.kernels.perf.pallas_analysis import analyze

B = 128


def _gather_kernel(order_ref, live_ref, x_ref, o_ref):
    @pl.when(pl.program_id(0) < live_ref[0])
    def _copy():
        o_ref[...] = x_ref[...] * 2.0


def _gathering(x, keys):
    """Rows blocks of x in the order of `keys` (an argsort XLA computes before the kernel);
    only the first `live` steps work, the rest repeat the last block."""
    order = jnp.argsort(keys).astype(jnp.int32)
    live = jnp.sum(keys > 0).astype(jnp.int32).reshape(1)
    order = jnp.where(jnp.arange(order.shape[0]) < live[0], order, order[live[0] - 1])
    return pl.pallas_call(
        _gather_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2,
            grid=(keys.shape[0],),
            in_specs=[pl.BlockSpec((8, B), lambda i, order, live: (order[i], 0))],
            out_specs=pl.BlockSpec((8, B), lambda i, order, live: (i, 0)),
        ),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(order, live, x)


def _inputs():
    keys = jnp.array([5, 3, 0, 9, 0, 7, 1, 0], jnp.int32)  # 5 live, argsort puts them last
    return jax.random.normal(jax.random.key(0), (64, B), jnp.float32), keys


def test_fetches_and_branch_shares_follow_the_prefetched_values():
    x, keys = _inputs()
    traced = jax.make_jaxpr(_gathering)(x, keys)
    flat = flatten(traced)
    assert scalar_inputs(flat) == [1]  # the keys, never x
    (scalars,) = scalar_operands(flat, [None, np.asarray(keys)])
    order = np.asarray(scalars.index[0])
    assert scalars.index[1].tolist() == [5]
    (known,) = analyze(traced, [scalars])
    (bound,) = analyze(traced)
    assert known.index_maps_exact and not bound.index_maps_exact
    x_fetches = {b.role: b.fetches for b in known.blocks}["input 0"]
    # the live steps' blocks, where the index changes; the repeated last block is not fetched
    assert x_fetches == 1 + int(np.sum(order[1:] != order[:-1])) == 5
    assert {b.role: b.fetches for b in bound.blocks}["input 0"] == 8
    # the copy runs on the 5 live steps of 8: its vector work by that share
    # (the predicate itself runs at every step)
    assert known.vector_ops_per_step == pytest.approx(bound.vector_ops_per_step * 5 / 8, rel=0.01)


def test_a_table_computed_by_another_kernel_is_not_followed():
    x, keys = _inputs()

    def program(x, keys):
        doubled = pl.pallas_call(
            lambda k_ref, o_ref: o_ref.__setitem__(..., k_ref[...] * 2),
            out_shape=jax.ShapeDtypeStruct(keys.shape, keys.dtype),
        )(keys)
        return _gathering(x, doubled)

    traced = jax.make_jaxpr(program)(x, keys)
    with pytest.raises(NotFlat, match="computed by another kernel"):
        scalar_operands(flatten(traced), [np.asarray(x), np.asarray(keys)])


def test_the_grouped_matmuls_padding_steps_fetch_and_compute_nothing(monkeypatch):
    """Groups of exactly one row tile: half the grid's items (tiles + groups - 1) are padding.
    Weights are fetched once per real item and depth block; the MXU work is the real items'."""
    monkeypatch.setattr(grouped, "BLOCK_ROWS", 16)
    monkeypatch.setattr(grouped, "BLOCK_COLS", 128)
    monkeypatch.setattr(grouped, "BLOCK_DEPTH", 128)
    groups, depth, cols = 8, 256, 128
    sizes = jnp.full((groups,), 16, jnp.int32)
    lhs = jnp.zeros((groups * 16, depth), jnp.bfloat16)
    weights = jnp.zeros((groups, depth, cols), jnp.bfloat16)

    def program(lhs, weights, sizes):
        return grouped._grouped_matmul(lhs, (weights,), sizes, out_dtype=jnp.bfloat16)

    traced = jax.make_jaxpr(program)(lhs, weights, sizes)
    flat = flatten(traced)
    scalars = scalar_operands(flat, [None, None, np.asarray(sizes)])
    (kernel,) = analyze(traced, scalars)
    assert kernel.grid == [1, groups + groups - 1, depth // 128]
    fetches = {b.role: b.fetches for b in kernel.blocks}
    assert fetches["input 1"] == groups * (depth // 128)  # each real item's depth blocks once
    assert fetches["output 0"] == groups
    (bound,) = analyze(traced)
    real_share = groups / (2 * groups - 1)
    assert kernel.mxu_flops_per_step == pytest.approx(bound.mxu_flops_per_step * real_share)
