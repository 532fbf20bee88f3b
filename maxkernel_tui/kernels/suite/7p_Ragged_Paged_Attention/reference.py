"""7p_Ragged_Paged_Attention: mixed prefill+decode paged attention (reference for maxkernel-tui).

Sequence i owns query rows cu_q_lens[i] .. cu_q_lens[i + 1] - 1 and kv_lens[i] cached tokens;
token t lives in slot t % page_size of page page_indices[i, t // page_size]. In kv_pages, head
2h is K and head 2h + 1 is V of kv head h; query head h uses kv head h // (Hq / Hkv).
logits = f32(q . k) * (1/sqrt(head_dim)) in f32; query r of a sequence sees keys
j <= kv_len - q_len + r with j < kv_len (others get -0.7 * f32 max); f32 softmax cast to bf16;
out = bf16(P . v). Rows past q_len and sequences i >= num_seqs[0] are zeroed; results are
scatter-added into a zero (max_tokens, Hq, head_dim) buffer.
"""
import jax
import jax.numpy as jnp

MASK_VALUE = -0.7 * float(jnp.finfo(jnp.float32).max)

CONFIGS = {
    "bench": {"max_tokens": 4096, "max_seqs": 64, "q_heads": 64, "kv_heads": 8, "head_dim": 128,
              "page_size": 16, "pages_per_seq": 256},
    "check": {"max_tokens": 256, "max_seqs": 16, "q_heads": 16, "kv_heads": 4, "head_dim": 128,
              "page_size": 16, "pages_per_seq": 32},
    "heldout": {"max_tokens": 384, "max_seqs": 24, "q_heads": 24, "kv_heads": 8,
                "head_dim": 128, "page_size": 16, "pages_per_seq": 24},
}


def _query_capacities(max_tokens, max_seqs):
    """Static per-sequence query capacities of the serving step.

    One-token decodes fill 3/4 of the sequence slots; the rest of the token budget is cut into
    prefill chunks of max_tokens / (max_seqs / 8) tokens, the last one shorter, so the
    capacities add up to max_tokens. Production (4096, 64): 48 x 1, 7 x 512, 1 x 464.
    """
    num_decodes = 3 * max_seqs // 4
    chunk = max_tokens // (max_seqs // 8)
    num_full_chunks, remainder = divmod(max_tokens - num_decodes, chunk)
    return (1,) * num_decodes + (chunk,) * num_full_chunks + (remainder,) * (remainder > 0)


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    max_tokens, max_seqs, pages_per_seq = c["max_tokens"], c["max_seqs"], c["pages_per_seq"]
    page_size, head_dim = c["page_size"], c["head_dim"]
    total_pages = max_seqs * pages_per_seq
    kv_capacity = pages_per_seq * page_size
    key_q, key_kv, key_pages = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(key_q, (max_tokens, c["q_heads"], head_dim), jnp.bfloat16)
    kv_pages = jax.random.normal(
        key_kv, (total_pages, page_size, 2 * c["kv_heads"], head_dim), jnp.bfloat16)

    q_lens = _query_capacities(max_tokens, max_seqs)
    prefill_lens = [n for n in q_lens if n > 1]
    # Decode contexts spread over the cache and end one token into a page (257 + 16 k in
    # production); prefill contexts end one token before a chunk boundary, capped by the cache.
    min_decode_pages = pages_per_seq // 16
    decode_kv_lens = [
        (min_decode_pages + (i * 73) % (pages_per_seq - min_decode_pages)) * page_size + 1
        for i in range(len(q_lens) - len(prefill_lens))]
    prefill_kv_lens = [min((j + 2) * prefill_lens[0], kv_capacity) - 1
                       for j in range(len(prefill_lens))]
    kv_lens = decode_kv_lens + prefill_kv_lens + [0] * (max_seqs - len(q_lens))

    cu_q_lens = [0]
    for n in q_lens:
        cu_q_lens.append(cu_q_lens[-1] + n)
    cu_q_lens += [cu_q_lens[-1]] * (max_seqs + 1 - len(cu_q_lens))
    # A global permutation makes each sequence's pages non-contiguous.
    page_indices = jax.random.permutation(key_pages, total_pages).astype(jnp.int32)
    dynamic = (q, kv_pages, jnp.array(kv_lens, jnp.int32),
               page_indices.reshape(max_seqs, pages_per_seq),
               jnp.array(cu_q_lens, jnp.int32), jnp.array([len(q_lens)], jnp.int32))
    return dynamic, (head_dim, max_tokens)


def computation(queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                head_dim, max_tokens):
    _, page_size, combined_kv_heads, _ = kv_pages.shape
    num_kv_heads = combined_kv_heads // 2
    num_q_heads = queries.shape[1]
    group = num_q_heads // num_kv_heads
    kv_capacity = page_indices.shape[1] * page_size

    def attend_one_seq(seq, capacity):
        q_start = cu_q_lens[seq]
        q_len = cu_q_lens[seq + 1] - q_start
        kv_len = kv_lens[seq]
        offsets = jnp.arange(capacity)
        rows = jnp.minimum(q_start + offsets, max_tokens - 1)
        # (kv head, member): query head h uses kv head h // group.
        q = queries[rows].reshape(capacity, num_kv_heads, group, head_dim)
        kv = kv_pages[page_indices[seq]].reshape(kv_capacity, combined_kv_heads, head_dim)
        k, v = kv[:, 0::2], kv[:, 1::2]
        logits = jnp.einsum("qkgd,tkd->kgqt", q, k, preferred_element_type=jnp.float32)
        logits = logits * (1.0 / head_dim ** 0.5)
        query_pos = (kv_len - q_len + offsets)[:, None]
        key_pos = jnp.arange(kv_capacity)[None, :]
        logits = jnp.where((key_pos > query_pos) | (key_pos >= kv_len), MASK_VALUE, logits)
        probs = jax.nn.softmax(logits, axis=-1).astype(kv_pages.dtype)
        out = jnp.einsum("kgqt,tkd->qkgd", probs, v).reshape(capacity, num_q_heads, head_dim)
        valid = (offsets < q_len) & (seq < num_seqs[0])
        return rows, jnp.where(valid[:, None, None], out, 0.0)

    capacities = _query_capacities(max_tokens, kv_lens.shape[0])
    output = jnp.zeros_like(queries)
    # Sequences sharing a capacity share static shapes, so they are batched with vmap.
    for capacity in sorted(set(capacities)):
        seqs = jnp.array([i for i, n in enumerate(capacities) if n == capacity], jnp.int32)
        rows, out = jax.vmap(lambda s: attend_one_seq(s, capacity))(seqs)
        output = output.at[rows.reshape(-1)].add(out.reshape(-1, num_q_heads, head_dim))
    return output
