"""10p_Sparse_MoE: Mixtral top-2 MoE, computed densely (reference written for maxkernel-tui).

Router: logits = x · W_router (bf16); top-k values and indices (ties -> lower index);
weights = bf16 softmax over only the k selected logits.
Experts: every expert n runs on every token, e_n = (silu(x · Wg[n]) * (x · Wu[n])) · Wd[n],
all matmuls returning bf16. Combine: w[n] = routing weight if n was selected else 0, built
with a float32 one-hot, so out = sum_n e_n * w[n] is contracted in f32 (float32 output).
"""
import jax
import jax.numpy as jnp

# Named input configurations: `bench` is the production shape, `check` runs on a CPU
# in well under a second, `heldout` is never shown to an agent.
CONFIGS = {
    "bench": {"batch": 2, "seq": 4096, "hidden": 4096, "ffn": 14336, "experts": 8},
    "check": {"batch": 2, "seq": 64, "hidden": 256, "ffn": 512, "experts": 8},
    "heldout": {"batch": 1, "seq": 96, "hidden": 384, "ffn": 640, "experts": 8},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_r, key_g, key_u, key_d = jax.random.split(jax.random.key(seed), 5)
    experts, hidden, ffn = c["experts"], c["hidden"], c["ffn"]
    x = jax.random.normal(key_x, (c["batch"], c["seq"], hidden), jnp.bfloat16)
    router = jax.random.normal(key_r, (hidden, experts), jnp.bfloat16) * 0.02
    gate_k = jax.random.normal(key_g, (experts, hidden, ffn), jnp.bfloat16) * 0.02
    up_k = jax.random.normal(key_u, (experts, hidden, ffn), jnp.bfloat16) * 0.02
    down_k = jax.random.normal(key_d, (experts, ffn, hidden), jnp.bfloat16) * 0.02
    num_experts_per_tok = 2
    return (x, router, gate_k, up_k, down_k), (num_experts_per_tok,)


def computation(x, router, gate_k, up_k, down_k, num_experts_per_tok):
    f32, bf16 = jnp.float32, jnp.bfloat16
    logits = jnp.einsum("bsh,he->bse", x, router, preferred_element_type=f32).astype(bf16)
    top_logits, top_experts = jax.lax.top_k(logits, num_experts_per_tok)
    top_weights = jax.nn.softmax(top_logits, axis=-1)
    # bf16 weight * f32 one-hot promotes to f32: the combine weights are f32.
    one_hot = jax.nn.one_hot(top_experts, router.shape[1], dtype=f32)
    expert_weights = jnp.sum(one_hot * top_weights[..., None], axis=-2)

    # Expert axis first: XLA:CPU cannot run a bf16 batched dot whose batch axis is not leading.
    gate = jnp.einsum("bsh,nhf->nbsf", x, gate_k, preferred_element_type=f32).astype(bf16)
    up = jnp.einsum("bsh,nhf->nbsf", x, up_k, preferred_element_type=f32).astype(bf16)
    hidden = jax.nn.silu(gate) * up
    expert_out = jnp.einsum("nbsf,nfh->nbsh", hidden, down_k,
                            preferred_element_type=f32).astype(bf16)
    return jnp.einsum("nbsh,bsn->bsh", expert_out.astype(f32), expert_weights)
