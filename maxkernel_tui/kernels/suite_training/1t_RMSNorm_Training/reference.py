"""1t_RMSNorm_Training: Llama RMSNorm with its backward (reference written for maxkernel-tui).

Upcast to f32, r = rsqrt(mean(x^2, last axis) + eps), y = bf16(x * r) * scale (Llama's
LlamaRMSNorm; the product taken in f32, where it is exact). Judged on y and on the gradients
of x and scale.
"""
import jax
import jax.numpy as jnp

# Named input configurations: `bench` is the production shape (Llama-3 8B: hidden 4096, a
# batch of 8 sequences of 2048 tokens), `check` runs on a CPU in well under a second,
# `heldout` is never shown to an agent.
CONFIGS = {
    "bench": {"batch": 8, "seq": 2048, "hidden": 4096},
    "check": {"batch": 2, "seq": 64, "hidden": 512},
    "heldout": {"batch": 3, "seq": 40, "hidden": 1280},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_scale = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(key_x, (c["batch"], c["seq"], c["hidden"]), jnp.bfloat16)
    scale = (jax.random.normal(key_scale, (c["hidden"],)) * 0.1 + 1.0).astype(jnp.bfloat16)
    epsilon = 1e-5
    return (x, scale), (epsilon,)


def computation(x, scale, epsilon):
    x32 = x.astype(jnp.float32)
    r = jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + epsilon)
    # The product of two bf16 values is exact in f32, so y equals a bf16 multiply; taking it in
    # f32 makes the gradient of scale a sum over the rows in f32, not in bf16.
    normed = (x32 * r).astype(jnp.bfloat16).astype(jnp.float32)
    return (normed * scale.astype(jnp.float32)).astype(jnp.bfloat16)
