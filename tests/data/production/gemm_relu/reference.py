"""gemm_relu: relu(x @ W + b) in f32, shaped like the suite's 41k with production shapes a CPU
can check by sampled tiles in seconds (a test task of maxkernel-tui's production defences).

At `bench` the whole program is over the interpret-mode budget (1.7e10 flops), so production
numerics come from sampled output tiles; `check` and `heldout` are 41k's own.
"""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"batch": 2048, "in_features": 2048, "out_features": 2048},
    "check": {"batch": 256, "in_features": 512, "out_features": 384},
    "heldout": {"batch": 200, "in_features": 384, "out_features": 640},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w, key_b = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(key_x, (c["batch"], c["in_features"]), jnp.float32)
    weight = jax.random.normal(key_w, (c["in_features"], c["out_features"]), jnp.float32) * 0.02
    bias = jax.random.normal(key_b, (c["out_features"],), jnp.float32) * 0.02
    return (x, weight, bias), ()


def computation(x, weight, bias):
    return jax.nn.relu(jnp.matmul(x, weight, precision=jax.lax.Precision.HIGHEST) + bias)
