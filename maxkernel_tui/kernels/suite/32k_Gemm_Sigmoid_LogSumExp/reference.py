"""32k_Gemm_Sigmoid_LogSumExp: GEMM, sigmoid, GEMM, logsumexp (KernelBench L2 #45).

h = sigmoid(x @ W1^T + b1); z = h @ W2^T + b2 (both weights stored (out, in));
output logsumexp(z) over axis 1, no keepdims. All f32, default matmul precision.
"""
import jax
import jax.numpy as jnp

# `check` and `heldout` keep rows a multiple of 8 and every feature dim a multiple of 128.
CONFIGS = {
    "bench": {"batch": 16384, "input_size": 2048, "hidden_size": 4096, "output_size": 1024},
    "check": {"batch": 256, "input_size": 256, "hidden_size": 512, "output_size": 128},
    "heldout": {"batch": 200, "input_size": 384, "hidden_size": 256, "output_size": 256},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w1, key_b1, key_w2, key_b2 = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.uniform(key_x, (c["batch"], c["input_size"]), jnp.float32)
    w1 = jax.random.normal(key_w1, (c["hidden_size"], c["input_size"]), jnp.float32) * 0.02
    b1 = jax.random.normal(key_b1, (c["hidden_size"],), jnp.float32) * 0.02
    w2 = jax.random.normal(key_w2, (c["output_size"], c["hidden_size"]), jnp.float32) * 0.02
    b2 = jax.random.normal(key_b2, (c["output_size"],), jnp.float32) * 0.02
    return (x, w1, b1, w2, b2), ()


def computation(x, w1, b1, w2, b2):
    h = jax.nn.sigmoid(jnp.matmul(x, w1.T) + b1)
    z = jnp.matmul(h, w2.T) + b2
    return jax.nn.logsumexp(z, axis=1)
