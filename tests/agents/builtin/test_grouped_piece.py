"""The grouped matmul's kernel module (pieces/grouped.py) and the MoE routing around it
(pieces/moe.py) run directly in TPU interpret mode at small shapes, against jnp: ragged groups
with empty ones and tiles straddling group boundaries, rows that are no multiple of the row
tile, several depth and column steps, two weights joined by a gated epilogue, and the routed
MoE against the dense computation of every expert on every token."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import grouped, moe

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks smaller than the arrays: several row tiles, column and depth steps."""
    monkeypatch.setattr(grouped, "BLOCK_ROWS", 16)
    monkeypatch.setattr(grouped, "BLOCK_COLS", 128)
    monkeypatch.setattr(grouped, "BLOCK_DEPTH", 128)


def _random(*shape, dtype=jnp.bfloat16, seed=0):
    return jax.random.normal(jax.random.key(seed), shape, dtype)


def _interpreted(function, *args, **kwargs):
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        return jax.block_until_ready(function(*args, **kwargs))


@pytest.mark.slow
@pytest.mark.parametrize(
    "sizes",
    [
        [20, 0, 5, 37, 0, 10],  # empty groups, boundaries inside tiles, 72 rows: 4.5 tiles
        [0, 0, 48],  # every row in the last group
        np.array([16, 16, 16, 16], np.int64),  # groups on tile boundaries, int64 sizes
    ],
)
def test_ragged_groups_match_ragged_dot(sizes):
    groups = len(sizes)
    rows = int(np.sum(sizes))
    lhs, rhs = _random(rows, 256), _random(groups, 256, 256, seed=1)
    got = _interpreted(
        grouped._grouped_matmul, lhs, (rhs,), jnp.asarray(sizes), out_dtype=jnp.float32
    )
    want = jax.lax.ragged_dot(
        lhs, rhs, jnp.asarray(sizes, jnp.int32), preferred_element_type=jnp.float32
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.slow
def test_two_weights_joined_by_a_gated_epilogue_with_f32_operands_cast_to_bf16():
    sizes = jnp.array([7, 30, 0, 11], jnp.int32)
    lhs = _random(48, 128, dtype=jnp.float32)
    gate, up = _random(4, 128, 256, dtype=jnp.float32, seed=1), _random(4, 128, 256, seed=2)

    def gated(g, u):
        return jax.nn.silu(g) * u

    got = _interpreted(
        grouped._grouped_matmul,
        lhs,
        (gate, up),
        sizes,
        out_dtype=jnp.float32,
        epilogue=gated,
        operands="bf16",
    )
    bf16 = lhs.astype(jnp.bfloat16)
    g = jax.lax.ragged_dot(
        bf16, gate.astype(jnp.bfloat16), sizes, preferred_element_type=jnp.float32
    )
    u = jax.lax.ragged_dot(bf16, up, sizes, preferred_element_type=jnp.float32)
    np.testing.assert_allclose(got, gated(g, u), rtol=1e-4, atol=1e-3)


def _dense_moe(x, router, gate_k, up_k, down_k, k):
    """Every expert on every token, weighted by the softmax of the top-k logits."""
    logits = jnp.einsum("th,he->te", x, router, preferred_element_type=jnp.float32)
    top_logits, top_experts = jax.lax.top_k(logits.astype(x.dtype), k)
    weights = jax.nn.softmax(top_logits.astype(jnp.float32), axis=-1)
    combine = jnp.sum(jax.nn.one_hot(top_experts, router.shape[1]) * weights[..., None], axis=1)
    f32 = jnp.float32
    gate = jnp.einsum("th,nhf->ntf", x, gate_k, preferred_element_type=f32)
    up = jnp.einsum("th,nhf->ntf", x, up_k, preferred_element_type=f32)
    hidden = (jax.nn.silu(gate) * up).astype(x.dtype)
    out = jnp.einsum("ntf,nfh->nth", hidden, down_k, preferred_element_type=f32)
    return jnp.einsum("nth,tn->th", out, combine)


@pytest.mark.slow
def test_the_routed_moe_matches_every_expert_on_every_token():
    tokens, hidden, ffn, experts, k = 40, 128, 256, 4, 2
    x = _random(2, tokens // 2, hidden)  # a batch axis: the routing flattens the tokens
    router = _random(hidden, experts, seed=1)
    gate_k, up_k = _random(experts, hidden, ffn, seed=2), _random(experts, hidden, ffn, seed=3)
    down_k = _random(experts, ffn, hidden, seed=4)
    scaled = [w * 0.1 for w in (gate_k, up_k, down_k)]
    got = _interpreted(
        moe._routed_moe,
        x,
        router,
        *scaled,
        k,
        grouped_matmul=grouped._grouped_matmul,
        out_dtype=jnp.float32,
    )
    want = _dense_moe(x.reshape(tokens, hidden), router, *scaled, k)
    assert got.shape == (2, tokens // 2, hidden)
    np.testing.assert_allclose(got.reshape(tokens, hidden), want, rtol=0.05, atol=0.05)
