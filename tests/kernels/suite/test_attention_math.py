"""Attention references (2p, 3p, 5p, 6p, 7p) checked against float64 NumPy formulations.

Each expected value is built with explicit loops (over sequences, pages and query rows), a kv
head index table per query head, and slices instead of masks, so it shares no code path with the
vectorised references.
"""

import jax
import numpy as np
import pytest

from maxkernel_tui.kernels.reference_runtime import jitted_reference

pytestmark = pytest.mark.slow  # runs the references under jax on their check shapes


def _f64(x):
    return np.asarray(x, np.float64)


def _softmax(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _attend(q, k, v, scale, bias=None):
    """One query row for all heads: q (H, D), k and v (T, H, D), optional bias (H, T)."""
    logits = np.einsum("hd,thd->ht", q, k) * scale
    if bias is not None:
        logits = logits + bias
    return np.einsum("ht,thd->hd", _softmax(logits), v)


def _causal_attention(q, k, v, scale, bias=None):
    """q, k, v: (seq, H, D); row i sees keys 0..i only (sliced, not masked); bias (H, seq, seq)."""
    out = np.empty(q.shape[:2] + v.shape[2:])
    for i in range(q.shape[0]):
        row_bias = None if bias is None else bias[:, i, : i + 1]
        out[i] = _attend(q[i], k[: i + 1], v[: i + 1], scale, row_bias)
    return out


def _run(module, dynamic, static):
    """The reference on inputs chosen by the test (static args stay compile-time constants)."""
    return jitted_reference(module, len(dynamic), len(static))(*dynamic, *static)


def _assert_close(out, expected, tol):
    """Max error relative to the output's scale, plus a mean error that systematic bugs break."""
    err = np.abs(_f64(out) - expected)
    scale = np.abs(expected).max()
    assert err.max() <= tol * scale, (err.max() / scale, tol)
    assert err.mean() <= tol / 10 * scale, (err.mean() / scale, tol / 10)


def _expected_2p(query, key, value):
    q, k, v = _f64(query), _f64(key), _f64(value)
    q_heads, head_dim = q.shape[2:]
    kv_of_head = np.arange(q_heads) // (q_heads // k.shape[2])
    return np.stack(
        [
            _causal_attention(q[b], k[b][:, kv_of_head], v[b][:, kv_of_head], head_dim**-0.5)
            for b in range(q.shape[0])
        ]
    )


def _expected_3p(
    x, q_down, q_up, kv_down, k_up, v_up, o_proj, heads, nope_dim, rope_dim, v_dim, rank, theta
):
    x, q_down, q_up, kv_down, k_up, v_up, o_proj = map(
        _f64, (x, q_down, q_up, kv_down, k_up, v_up, o_proj)
    )
    batch, seq, _ = x.shape
    half = rope_dim // 2
    # Rotate-half RoPE as complex rotation of the pairs (d, d + half).
    angles = np.arange(seq)[:, None] * theta ** (-np.arange(half) * 2.0 / rope_dim)[None, :]
    rotation = np.exp(1j * angles)[:, None, :]

    def rope(t):
        """t: (batch, seq, heads, rope_dim)."""
        z = (t[..., :half] + 1j * t[..., half:]) * rotation
        return np.concatenate([z.real, z.imag], axis=-1)

    q = (x @ q_down @ q_up).reshape(batch, seq, heads, nope_dim + rope_dim)
    kv = x @ kv_down
    latent, k_rope = kv[..., :rank], rope(kv[:, :, None, rank:])
    k_nope = (latent @ k_up).reshape(batch, seq, heads, nope_dim)
    v = (latent @ v_up).reshape(batch, seq, heads, v_dim)
    q_full = np.concatenate([q[..., :nope_dim], rope(q[..., nope_dim:])], -1)
    k_full = np.concatenate([k_nope, np.broadcast_to(k_rope, (batch, seq, heads, rope_dim))], -1)
    attended = np.stack(
        [
            _causal_attention(q_full[b], k_full[b], v[b], (nope_dim + rope_dim) ** -0.5)
            for b in range(batch)
        ]
    )
    return attended.reshape(batch, seq, heads * v_dim) @ o_proj


def _expected_5p(q, k, v, rel_pos_bias, head_dim, _seq_len):
    # BHSD -> per batch (seq, heads, dim) and back.
    q, k, v = (_f64(t).transpose(0, 2, 1, 3) for t in (q, k, v))
    out = np.stack(
        [
            _causal_attention(q[b], k[b], v[b], head_dim**-0.5, _f64(rel_pos_bias))
            for b in range(q.shape[0])
        ]
    )
    return out.transpose(0, 2, 1, 3)


def _gather_pages(pages, page_table):
    """Concatenate whole pages in table order: (pages_per_seq * page_size, ...)."""
    return np.concatenate([pages[p] for p in page_table], axis=0)


def _expected_6p(
    queries,
    k_pages,
    v_pages,
    kv_lens,
    page_indices,
    cu_q_lens,
    num_seqs,
    num_q_heads,
    num_kv_heads,
    head_dim,
    _max_seq_len,
):
    queries, k_pages, v_pages = _f64(queries), _f64(k_pages), _f64(v_pages)
    page_indices, kv_lens, cu_q_lens = map(np.asarray, (page_indices, kv_lens, cu_q_lens))
    kv_of_head = np.arange(num_q_heads) // (num_q_heads // num_kv_heads)
    expected = np.empty((num_seqs, num_q_heads, head_dim))
    for s in range(num_seqs):
        n = kv_lens[s]
        k = _gather_pages(k_pages, page_indices[s])[:n, kv_of_head]
        v = _gather_pages(v_pages, page_indices[s])[:n, kv_of_head]
        expected[s] = _attend(queries[cu_q_lens[s]], k, v, head_dim**-0.5)
    return expected


def _expected_7p(
    queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, head_dim, _max_tokens
):
    queries, kv_pages = _f64(queries), _f64(kv_pages)
    kv_lens, page_indices, cu_q_lens = map(np.asarray, (kv_lens, page_indices, cu_q_lens))
    num_q_heads = queries.shape[1]
    kv_of_head = np.arange(num_q_heads) // (num_q_heads // (kv_pages.shape[2] // 2))
    expected = np.zeros(queries.shape)
    written = np.zeros(queries.shape[0], np.int64)
    for i in range(int(num_seqs[0])):
        q_start, q_len, kv_len = cu_q_lens[i], cu_q_lens[i + 1] - cu_q_lens[i], kv_lens[i]
        cache = _gather_pages(kv_pages, page_indices[i])[:kv_len]
        # Combined heads interleave K (even) and V (odd) of each kv head.
        k, v = cache[:, 0::2][:, kv_of_head], cache[:, 1::2][:, kv_of_head]
        for r in range(q_len):
            # The r-th new token sits at position kv_len - q_len + r and sees itself and earlier.
            visible = kv_len - q_len + r + 1
            row = q_start + r
            expected[row] = _attend(queries[row], k[:visible], v[:visible], head_dim**-0.5)
            written[row] += 1
    return expected, written


def test_2p_gqa_head_mapping_and_causal_mask(reference):
    _, dynamic, static, out = reference("2p_GQA_Attention")
    _assert_close(out, _expected_2p(*dynamic, *static), 0.02)
    assert out.dtype.name == "bfloat16"


def test_3p_mla_projections_rope_and_attention(reference):
    _, dynamic, static, out = reference("3p_MLA_Attention")
    _assert_close(out, _expected_3p(*dynamic, *static), 0.02)
    assert out.dtype.name == "bfloat16"


def test_5p_flex_bias_and_causal_mask(reference):
    module, (q, k, v, bias), static, out = reference("5p_Flex_Attention")
    assert out.dtype.name == "bfloat16"
    # With production scales (k * 0.02, bias * 0.01) the softmax is nearly uniform and a missing
    # bias or scale hides in bf16 noise, so the inputs are rescaled to unit spread.
    sharp = (q, k * 50, v, bias * 100)
    _assert_close(_run(module, sharp, static), _expected_5p(*sharp, *static), 0.02)


def test_6p_paged_gather_and_kv_len_mask(reference):
    module, dynamic, static, out = reference("6p_Paged_Attention")
    assert out.dtype.name == "bfloat16"
    kv_lens, page_indices = np.asarray(dynamic[3]), np.asarray(dynamic[4])
    # The check config must exercise both the length mask and a non-contiguous page table.
    assert kv_lens.min() < static[-1] and not np.all(np.diff(page_indices.ravel()) == 1)
    _assert_close(out, _expected_6p(*dynamic, *static), 0.03)
    # k * 0.02 makes the softmax nearly uniform; unit-spread keys make a wrong page, kv head or
    # length mask stand out far above bf16 noise.
    sharp = (dynamic[0], dynamic[1] * 50, *dynamic[2:])
    _assert_close(_run(module, sharp, static), _expected_6p(*sharp, *static), 0.03)


def test_7p_ragged_causal_offset_and_paged_gather(reference):
    module, dynamic, static, out = reference("7p_Ragged_Paged_Attention")
    expected, written = _expected_7p(*dynamic, *static)
    # Every packed query row belongs to exactly one active sequence.
    assert np.all(written == 1)
    _assert_close(out, expected, 0.02)
    assert out.dtype.name == "bfloat16"

    # The bench metadata reproduces the benchmark's serving step. Only the int32 metadata is
    # returned, so jit drops the large random q and kv_pages.
    bench_static = []

    def bench_metadata():
        bench_dynamic, static_args = module.get_inputs("bench")
        bench_static.extend(static_args)
        return bench_dynamic[2:]

    kv_lens, page_indices, cu_q_lens, num_seqs = map(np.asarray, jax.jit(bench_metadata)())
    q_lens = [1] * 48 + [512] * 7 + [464]
    decode_kv_lens = [257 + (i * 73 % 240) * 16 for i in range(48)]
    prefill_kv_lens = [1023, 1535, 2047, 2559, 3071, 3583, 4095, 4095]
    assert kv_lens.tolist() == decode_kv_lens + prefill_kv_lens + [0] * 8
    assert cu_q_lens.tolist() == [0, *np.cumsum(q_lens).tolist()] + [4096] * 8
    assert num_seqs.tolist() == [56]
    assert page_indices.shape == (64, 256)
    assert sorted(page_indices.ravel().tolist()) == list(range(16384))
    assert bench_static == [128, 4096]
