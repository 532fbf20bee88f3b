"""Expert baseline for 3p_MLA_Attention: jax's own Pallas TPU flash attention and matmul.

As JAXBench's 3p optimized.py, the attention is jax's flash attention (causal, blocks 2048 /
2048 / 1024) with the 192-wide nope+rope head padded to 256 (zero columns change no logit; v is
padded alike and cut back to 128). The projections run in jax's Pallas matmul with the GEMM
tuning of 8p (blocks 1024 x 2048, block_k 1024); RoPE is elementwise glue in jnp, in the
reference's rotate-half form. A tuned block larger than a dimension is cut to the largest
multiple of 128 that divides it, or to the whole dimension.
"""
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.flash_attention import BlockSizes, flash_attention
from jax.experimental.pallas.ops.tpu.matmul import matmul

BLOCK_Q, BLOCK_K_MAJOR, BLOCK_K = 2048, 2048, 1024
GEMM_M, GEMM_N, GEMM_K = 1024, 2048, 1024
PADDED_HEAD_DIM = 256


def _block(dim, tuned):
    """The largest multiple of 128 up to `tuned` that divides `dim`; `dim` itself if none."""
    for size in range(min(tuned, dim) // 128 * 128, 0, -128):
        if dim % size == 0:
            return size
    return dim


def _project(x, w):
    """x (rows, k) . w (k, n) in jax's Pallas matmul: f32 accumulation, bf16 out."""
    (m, k), n = x.shape, w.shape[1]
    blocks = (_block(m, GEMM_M), _block(n, GEMM_N))
    return matmul(x, w, block_shape=blocks, block_k=_block(k, GEMM_K), out_dtype=x.dtype)


def _rope(x, cos, sin):
    """Rotate-half RoPE on the last axis; x is (B, S, H, R), cos/sin are (S, R/2) bf16."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    cos, sin = cos[:, None, :], sin[:, None, :]
    return jnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def _pad_heads(x):
    """(B, S, H, d) -> (B, H, S, 256), zero columns after d."""
    padding = ((0, 0), (0, 0), (0, 0), (0, PADDED_HEAD_DIM - x.shape[-1]))
    return jnp.transpose(jnp.pad(x, padding), (0, 2, 1, 3))


def computation(x, q_down, q_up, kv_down, k_up, v_up, o_proj,
                num_heads, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, kv_lora_rank,
                rope_theta):
    batch, seq, hidden = x.shape
    head_dim = qk_nope_head_dim + qk_rope_head_dim
    rows = x.reshape(batch * seq, hidden)
    q = _project(_project(rows, q_down), q_up).reshape(batch, seq, num_heads, head_dim)
    kv = _project(rows, kv_down)
    latent, k_rope = kv[:, :kv_lora_rank], kv[:, kv_lora_rank:]
    k_nope = _project(latent, k_up).reshape(batch, seq, num_heads, qk_nope_head_dim)
    v = _project(latent, v_up).reshape(batch, seq, num_heads, v_head_dim)

    inv_freq = 1.0 / (rope_theta ** (
        jnp.arange(0, qk_rope_head_dim, 2, dtype=jnp.float32) / qk_rope_head_dim))
    angles = jnp.arange(seq, dtype=jnp.float32)[:, None] * inv_freq[None, :]
    cos, sin = jnp.cos(angles).astype(jnp.bfloat16), jnp.sin(angles).astype(jnp.bfloat16)
    q_rope = _rope(q[..., qk_nope_head_dim:], cos, sin)
    k_rope = _rope(k_rope.reshape(batch, seq, 1, qk_rope_head_dim), cos, sin)
    k_rope = jnp.broadcast_to(k_rope, (batch, seq, num_heads, qk_rope_head_dim))

    q_full = _pad_heads(jnp.concatenate([q[..., :qk_nope_head_dim], q_rope], axis=-1))
    k_full = _pad_heads(jnp.concatenate([k_nope, k_rope], axis=-1))
    k_major = _block(seq, BLOCK_K_MAJOR)
    blocks = BlockSizes(block_q=_block(seq, BLOCK_Q), block_k_major=k_major,
                        block_k=_block(k_major, BLOCK_K), block_b=1)
    out = flash_attention(q_full, k_full, _pad_heads(v), causal=True,
                          sm_scale=head_dim**-0.5, block_sizes=blocks)
    out = jnp.transpose(out[..., :v_head_dim], (0, 2, 1, 3)).reshape(batch * seq, -1)
    return _project(out, o_proj).reshape(batch, seq, hidden)
