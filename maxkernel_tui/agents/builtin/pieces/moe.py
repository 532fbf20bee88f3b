"""A top-k routed mixture of gated-SiLU experts around the grouped matmul (pieces/grouped.py):
router logits, top-k, the tokens' copies sorted by expert, the gate and up projections in one
grouped matmul (their SiLU product as its epilogue), the down projection in another, and the
expert outputs put back in token order and summed with the router's weights.

Only the selected experts run on a token: k of the experts' work, where a dense reference runs
all. The glue (a (tokens, experts) router matmul, top-k, an argsort and a few gathers of
integer ids and rows) stays in XLA; the expert matmuls, nearly all the flops, are Pallas.
`grouped_matmul` is the grouped matmul to call: the kernel file passes its Pallas one, the
recogniser a plain jnp one to check its reading against the reference. Imports jax.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


def _silu_gate(gate, up, *, dtype):
    """SiLU(gate) * up, each product rounded to `dtype` first, as the reference rounds them."""
    return jax.nn.silu(gate.astype(dtype)) * up.astype(dtype)


def _routed_moe(x, router, gate_k, up_k, down_k, k, *, grouped_matmul, out_dtype, operands=None):
    """x (..., hidden); router (hidden, experts); gate_k, up_k (experts, hidden, ffn); down_k
    (experts, ffn, hidden). Logits and expert outputs are rounded to x's dtype; the weighted sum
    over the k selected experts is in f32, returned in `out_dtype`."""
    hidden = x.shape[-1]
    tokens = x.reshape(-1, hidden)
    experts = router.shape[1]
    logits = jnp.dot(tokens, router, preferred_element_type=jnp.float32).astype(x.dtype)
    top_logits, top_experts = jax.lax.top_k(logits, k)
    weights = jax.nn.softmax(top_logits, axis=-1).astype(jnp.float32)
    # Each token's k copies, sorted by expert: consecutive rows per expert.
    chosen = top_experts.reshape(-1)
    order = jnp.argsort(chosen, stable=True)
    group_sizes = jnp.bincount(chosen, length=experts).astype(jnp.int32)
    copies = tokens[order // k]
    gated = grouped_matmul(
        copies,
        (gate_k, up_k),
        group_sizes,
        out_dtype=x.dtype,
        epilogue=functools.partial(_silu_gate, dtype=x.dtype),
        operands=operands,
    )
    expert_out = grouped_matmul(gated, (down_k,), group_sizes, out_dtype=x.dtype, operands=operands)
    # Back to token order: copy j of token t is row t * k + j.
    place = jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0], dtype=order.dtype))
    slots = expert_out[place].reshape(-1, k, hidden).astype(jnp.float32)
    out = slots[:, 0] * weights[:, :1]
    for slot in range(1, k):  # k is small: a sum of products, not a reduction
        out = out + slots[:, slot] * weights[:, slot : slot + 1]
    return out.reshape(x.shape).astype(out_dtype)
