"""2t_GEMM_GELU_Training: an MLP up-projection with a GELU epilogue and its backward (reference
written for maxkernel-tui).

z = x . w accumulated in f32, y = bf16(gelu(z)) with GELU's tanh approximation (GPT-J's
`gelu_new`). Judged on y and on the gradients of x and w.
"""
import jax
import jax.numpy as jnp

# Named input configurations: `bench` is the production shape (GPT-J 6B's MLP: d_model 4096,
# d_ff 16384, 8192 tokens), `check` runs on a CPU in about a second, `heldout` is never shown to
# an agent.
CONFIGS = {
    "bench": {"tokens": 8192, "d_model": 4096, "d_ff": 16384},
    "check": {"tokens": 256, "d_model": 256, "d_ff": 512},
    "heldout": {"tokens": 384, "d_model": 384, "d_ff": 640},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(key_x, (c["tokens"], c["d_model"]), jnp.bfloat16)
    w = (jax.random.normal(key_w, (c["d_model"], c["d_ff"])) * c["d_model"] ** -0.5).astype(
        jnp.bfloat16
    )
    return (x, w), ()


def computation(x, w):
    z = jnp.dot(x, w, preferred_element_type=jnp.float32)
    return jax.nn.gelu(z, approximate=True).astype(jnp.bfloat16)
