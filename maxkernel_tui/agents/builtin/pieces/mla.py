"""The multi-head latent attention (MLA) layer the built-in agent writes: the projections as
matmul stages (pieces/matmul.py), RoPE on the query's and the shared key's rotary parts, then
flash attention (pieces/attention.py) over keys built from the compressed latent, and the
output projection, in the manner of jax's Pallas TPU ops.

    q = x . q_down . q_up                   per head: (nope, rope) dims
    kv = x . kv_down = (latent c, k_rope)   one rotary key per position, shared by every head
    k = (c . k_up, rope(k_rope)), v = c . v_up, out = attention(rope(q), k, v) . o_proj

`_mla_layer` is the glue, written once: it takes its matmul and its attention as arguments, so
the generated file runs it with the Pallas stages and the recogniser (mla.py) with plain jnp
to confirm its reading of the reference. render (mla_render.py) copies these functions into the
kernel file unchanged, with the matmul and flash-attention pieces; tests call them directly in
interpret mode. Imports jax.
"""

from __future__ import annotations

import jax.numpy as jnp

from maxkernel_tui.agents.builtin.pieces.matmul import _matmul_stage


def _store_block(acc_ref, out_ref, tm, tn):
    """A projection's epilogue: the f32 accumulator rounded to the output's dtype."""
    out_ref[...] = acc_ref[...].astype(out_ref.dtype)


def _project(lhs, weight):
    """lhs (rows, depth) . weight (depth, cols) in a Pallas matmul stage, f32 accumulation,
    the output in the operands' promoted dtype (as `lhs @ weight`)."""
    out_dtype = jnp.result_type(lhs, weight)
    return _matmul_stage(
        lhs,
        weight,
        roles=(),
        outputs=[("tile", out_dtype)],
        epilogue=_store_block,
        row_align=8 * max(1, 4 // lhs.dtype.itemsize),
    )


def _rope_tables(seq, rope_dim, theta, table_dtype):
    """cos and sin (seq, rope_dim / 2) of positions 0..seq-1, angles in f32, rounded to
    `table_dtype` as the reference rounds them."""
    inv_freq = 1.0 / (theta ** (jnp.arange(0, rope_dim, 2, dtype=jnp.float32) / rope_dim))
    angles = jnp.arange(seq, dtype=jnp.float32)[:, None] * inv_freq[None, :]
    return jnp.cos(angles).astype(table_dtype), jnp.sin(angles).astype(table_dtype)


def _rotate(x, cos, sin, interleaved):
    """RoPE on x (batch, seq, heads, rope_dim): rotate-half (first half against second), or
    `interleaved` (even against odd dims)."""
    cos, sin = cos[:, None, :], sin[:, None, :]
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        return jnp.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(x.shape)
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return jnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def _mla_layer(
    x,
    q_down,
    q_up,
    kv_down,
    k_up,
    v_up,
    o_proj,
    *,
    project,
    attend,
    theta,
    table_dtype,
    interleaved,
):
    """The MLA layer on x (batch, seq, hidden). `q_down` None: q = x . q_up. Every size comes
    from the weights: the latent's rank is k_up's rows, the rotary width what kv_down has beyond
    it, the heads what q_up has beyond k_up's columns over the rotary width, and the nope and
    value head dims k_up's and v_up's columns per head. `project(lhs, weight)` is the matmul,
    `attend(q, k, v)` attention on (batch, seq, heads, dim) inputs."""
    batch, seq, hidden = x.shape
    rank = k_up.shape[0]
    rope_dim = kv_down.shape[1] - rank
    heads = (q_up.shape[1] - k_up.shape[1]) // rope_dim
    nope_dim, v_dim = k_up.shape[1] // heads, v_up.shape[1] // heads
    qk_dim = nope_dim + rope_dim
    rows = x.reshape(batch * seq, hidden)
    q = project(rows if q_down is None else project(rows, q_down), q_up)
    q = q.reshape(batch, seq, heads, qk_dim)
    kv = project(rows, kv_down)
    latent, k_rope = kv[:, :rank], kv[:, rank:]
    k_nope = project(latent, k_up).reshape(batch, seq, heads, nope_dim)
    v = project(latent, v_up).reshape(batch, seq, heads, v_dim)
    cos, sin = _rope_tables(seq, rope_dim, theta, table_dtype)
    q_rope = _rotate(q[..., nope_dim:], cos, sin, interleaved)
    k_rope = _rotate(k_rope.reshape(batch, seq, 1, rope_dim), cos, sin, interleaved)
    k_rope = jnp.broadcast_to(k_rope, (batch, seq, heads, rope_dim))
    q = jnp.concatenate([q[..., :nope_dim], q_rope], axis=-1)
    k = jnp.concatenate([k_nope, k_rope], axis=-1)
    out = attend(q, k, v).reshape(batch * seq, heads * v_dim)
    return project(out, o_proj).reshape(batch, seq, o_proj.shape[1])
