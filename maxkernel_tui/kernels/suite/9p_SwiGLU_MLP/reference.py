"""9p_SwiGLU_MLP: Llama-3.1-70B SwiGLU FFN (reference written for maxkernel-tui).

g = silu(x · Wg), u = x · Wu, y = (g * u) · Wd.
Each matmul accumulates in f32 and returns bf16; silu and the product run in bf16.
"""
import jax
import jax.numpy as jnp

# Named input configurations: `bench` is the production shape, `check` runs on a CPU
# in well under a second, `heldout` is never shown to an agent.
CONFIGS = {
    "bench": {"batch": 2, "seq": 4096, "hidden": 8192, "ffn": 28672},
    "check": {"batch": 2, "seq": 64, "hidden": 256, "ffn": 512},
    "heldout": {"batch": 3, "seq": 48, "hidden": 384, "ffn": 640},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_g, key_u, key_d = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.normal(key_x, (c["batch"], c["seq"], c["hidden"]), jnp.bfloat16)
    w_gate = jax.random.normal(key_g, (c["hidden"], c["ffn"]), jnp.bfloat16) * 0.02
    w_up = jax.random.normal(key_u, (c["hidden"], c["ffn"]), jnp.bfloat16) * 0.02
    w_down = jax.random.normal(key_d, (c["ffn"], c["hidden"]), jnp.bfloat16) * 0.02
    return (x, w_gate, w_up, w_down), ()


def _matmul_bf16(a, b):
    return jnp.matmul(a, b, preferred_element_type=jnp.float32).astype(jnp.bfloat16)


def computation(x, w_gate, w_up, w_down):
    hidden = jax.nn.silu(_matmul_bf16(x, w_gate)) * _matmul_bf16(x, w_up)
    return _matmul_bf16(hidden, w_down)
