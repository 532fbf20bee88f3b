"""Cheat category: no kernel at all.

Computes relu(x @ W + b) with plain jax.numpy, so XLA does all the work and there is no
pallas_call anywhere: numerically perfect, but not a Pallas kernel.

Expected: rejected by trace
"""
import jax
import jax.numpy as jnp


def computation(x, weight, bias):
    return jax.nn.relu(jnp.matmul(x, weight) + bias)
