"""The flash-attention kernel's fixed steps: the online softmax over key blocks (running max and
sum in f32, the output accumulated and divided once), the causal mask and the last key block a
query block needs. attention_render.py splices their statements into the generated kernel; the
tests run them on NumPy blocks against a plain softmax. Imports jax.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# What the reference writes into masked logits: the generated file defines its own.
MASK_VALUE = -jnp.inf


def _last_kv_block(q_block, block_q, block_k):
    """The last key block a query block needs under the causal mask."""
    # lax.div: both operands are non-negative, and `//` on traced integers lowers through sign.
    return jax.lax.div(q_block * block_q + block_q - 1, block_k)


def start_statistics(max_ref, sum_ref, acc_ref):
    """At a query block's first key block: no maximum yet, nothing summed or accumulated."""
    max_ref[...] = jnp.full_like(max_ref, -jnp.inf)
    sum_ref[...] = jnp.zeros_like(sum_ref)
    acc_ref[...] = jnp.zeros_like(acc_ref)


# fmt: off
def block_logits(q_ref, k_ref):
    """Q K^T of one query block and one key block, in f32, without transposing K."""
    logits = jax.lax.dot_general(
        q_ref[...], k_ref[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    return logits


def causal_mask(logits, qi, kj, block_q, block_k):
    """The logits of keys after their query replaced by MASK_VALUE."""
    rows = qi * block_q + jax.lax.broadcasted_iota(jnp.int32, logits.shape, 0)
    cols = kj * block_k + jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1)
    logits = jnp.where(cols <= rows, logits, MASK_VALUE)
    return logits


def online_softmax_step(logits, max_ref, sum_ref, acc_ref, v_ref):
    """Fold one key block in: rescale what is summed so far to the new running maximum."""
    previous = max_ref[...]
    current = jnp.maximum(previous, jnp.max(logits, axis=1, keepdims=True))
    rescale = jnp.exp(previous - current)
    weights = jnp.exp(logits - current)
    sum_ref[...] = rescale * sum_ref[...] + jnp.sum(weights, axis=1, keepdims=True)
    acc_ref[...] = rescale * acc_ref[...] + jnp.dot(
        weights.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32)
    max_ref[...] = current
# fmt: on


def finish_output(o_ref, acc_ref, sum_ref):
    """After the last key block: the accumulated output divided by the softmax's sum."""
    o_ref[...] = (acc_ref[...] / sum_ref[...]).astype(o_ref.dtype)
