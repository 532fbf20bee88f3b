"""The MLA layer (pieces/mla.py) run directly in TPU interpret mode at small shapes, against a
plain jnp MLA written here with einsums: a low-rank query with rotate-half RoPE and bf16 tables
under the causal mask; a one-projection query with interleaved RoPE and f32 tables, no mask;
the projection stage alone on rows its blocks do not divide evenly; and the flash-attention piece
with a value head narrower than the query's (what MLA needs of it)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import attention, matmul, mla

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
pytestmark = pytest.mark.slow  # interpret mode: seconds per kernel on a busy 2-core machine


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 128: several row, column and key blocks at these shapes."""
    for module, names in ((attention, ("BLOCK_Q", "BLOCK_KV")), (matmul, ("BLOCK_ROWS",))):
        for name in names:
            monkeypatch.setattr(module, name, 128)
    monkeypatch.setattr(matmul, "BLOCK_COLS", 128)
    monkeypatch.setattr(matmul, "BLOCK_DEPTH", 128)


def _weights(shapes, dtype=jnp.bfloat16, scale=0.08, seed=0):
    keys = jax.random.split(jax.random.key(seed), len(shapes))
    return [
        jax.random.normal(k, s, jnp.float32).astype(dtype) * scale for k, s in zip(keys, shapes)
    ]


def _rope(t, theta, table_dtype, interleaved):
    """RoPE written independently of the piece: complex rotation of (re, im) pairs."""
    seq, dim = t.shape[1], t.shape[-1]
    freq = theta ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    angle = np.arange(seq)[:, None] * freq[None, :]
    cos = jnp.asarray(np.cos(angle), jnp.float32).astype(table_dtype)[None, :, None, :]
    sin = jnp.asarray(np.sin(angle), jnp.float32).astype(table_dtype)[None, :, None, :]
    t = t.astype(jnp.float32)
    if interleaved:
        re, im = t[..., 0::2], t[..., 1::2]
    else:
        re, im = jnp.split(t, 2, axis=-1)
    out_re, out_im = re * cos - im * sin, im * cos + re * sin
    if interleaved:
        return jnp.stack([out_re, out_im], axis=-1).reshape(t.shape)
    return jnp.concatenate([out_re, out_im], axis=-1)


def _plain_mla(
    x,
    q_down,
    q_up,
    kv_down,
    k_up,
    v_up,
    o_proj,
    *,
    nope,
    rope,
    v_dim,
    theta,
    table_dtype,
    interleaved,
    causal,
    scale,
):
    """MLA in f32 einsums: the same dataflow, none of the piece's code."""
    f32 = [
        None if w is None else w.astype(jnp.float32)
        for w in (x, q_down, q_up, kv_down, k_up, v_up, o_proj)
    ]
    x, q_down, q_up, kv_down, k_up, v_up, o_proj = f32
    batch, seq, _ = x.shape
    heads = v_up.shape[1] // v_dim
    rank = k_up.shape[0]
    q = x @ q_down @ q_up if q_down is not None else x @ q_up
    q = q.reshape(batch, seq, heads, nope + rope)
    kv = x @ kv_down
    k_nope = (kv[..., :rank] @ k_up).reshape(batch, seq, heads, nope)
    v = (kv[..., :rank] @ v_up).reshape(batch, seq, heads, v_dim)
    k_rope = _rope(kv[..., rank:][:, :, None, :], theta, table_dtype, interleaved)
    q = jnp.concatenate([q[..., :nope], _rope(q[..., nope:], theta, table_dtype, interleaved)], -1)
    k = jnp.concatenate([k_nope, jnp.broadcast_to(k_rope, (batch, seq, heads, rope))], -1)
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if causal:
        logits = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), logits, -1e30)
    out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, -1), v)
    return out.reshape(batch, seq, heads * v_dim) @ o_proj


def _run_piece(args, *, theta, table_dtype, interleaved, causal, scale):
    attend = functools.partial(
        attention._flash_attention,
        out_dtype=args[0].dtype,
        seq_first=True,
        scale=scale,
        causal=causal,
        mask_value=-1e30,
    )
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        return jax.block_until_ready(
            mla._mla_layer(
                *args,
                project=mla._project,
                attend=attend,
                theta=theta,
                table_dtype=table_dtype,
                interleaved=interleaved,
            )
        )


def test_a_low_rank_query_with_rotate_half_rope_under_the_causal_mask():
    batch, seq, hidden, q_rank, heads, rank, nope, rope, v_dim = (
        1,
        256,
        256,
        128,
        2,
        128,
        64,
        32,
        64,
    )
    x = _weights([(batch, seq, hidden)], scale=1.0, seed=1)[0]
    weights = _weights(
        [
            (hidden, q_rank),
            (q_rank, heads * (nope + rope)),
            (hidden, rank + rope),
            (rank, heads * nope),
            (rank, heads * v_dim),
            (heads * v_dim, hidden),
        ]
    )
    scale = (nope + rope) ** -0.5
    got = _run_piece(
        [x, *weights],
        theta=10000.0,
        table_dtype=jnp.bfloat16,
        interleaved=False,
        causal=True,
        scale=scale,
    )
    want = _plain_mla(
        x,
        *weights,
        nope=nope,
        rope=rope,
        v_dim=v_dim,
        theta=10000.0,
        table_dtype=jnp.bfloat16,
        interleaved=False,
        causal=True,
        scale=scale,
    )
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_allclose(np.asarray(got, np.float32), want, atol=0.05, rtol=0.05)


def test_a_single_projection_query_with_interleaved_rope_and_f32_tables_unmasked():
    batch, seq, hidden, heads, rank, nope, rope, v_dim = 2, 128, 128, 3, 64, 32, 32, 128
    x = _weights([(batch, seq, hidden)], dtype=jnp.float32, scale=1.0, seed=2)[0]
    weights = _weights(
        [
            (hidden, heads * (nope + rope)),
            (hidden, rank + rope),
            (rank, heads * nope),
            (rank, heads * v_dim),
            (heads * v_dim, hidden),
        ],
        dtype=jnp.float32,
        seed=3,
    )
    got = _run_piece(
        [x, None, *weights],
        theta=500000.0,
        table_dtype=jnp.float32,
        interleaved=True,
        causal=False,
        scale=0.1,
    )
    want = _plain_mla(
        x,
        None,
        *weights,
        nope=nope,
        rope=rope,
        v_dim=v_dim,
        theta=500000.0,
        table_dtype=jnp.float32,
        interleaved=True,
        causal=False,
        scale=0.1,
    )
    np.testing.assert_allclose(got, want, atol=2e-3, rtol=2e-3)


def test_the_projection_stage_on_rows_and_columns_its_blocks_do_not_divide():
    lhs, weight = _weights([(200, 384), (384, 160)], scale=1.0, seed=4)
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        got = jax.block_until_ready(mla._project(lhs, weight))
    want = jnp.dot(lhs, weight, preferred_element_type=jnp.float32)
    assert got.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(got, np.float32), want, atol=0.1, rtol=0.02)


def test_flash_attention_with_a_value_head_narrower_than_the_query_head():
    q, k = _weights([(1, 2, 256, 96), (1, 2, 256, 96)], dtype=jnp.float32, scale=1.0, seed=5)
    (v,) = _weights([(1, 1, 256, 32)], dtype=jnp.float32, scale=1.0, seed=6)  # one shared head
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        got = attention._flash_attention(
            q, k[:, :1], v, out_dtype=jnp.float32, causal=True, scale=0.2
        )
    logits = jnp.einsum("bhqd,bkd->bhqk", q, k[:, 0]) * 0.2
    logits = jnp.where(jnp.tril(jnp.ones((256, 256), bool)), logits, -jnp.inf)
    want = jnp.einsum("bhqk,bkd->bhqd", jax.nn.softmax(logits, -1), v[:, 0])
    assert got.shape == (1, 2, 256, 32)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
