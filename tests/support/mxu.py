"""Test inputs a TPU's one-pass matmul holds exactly."""

import jax
import jax.numpy as jnp


def mxu_exact(values: jax.Array) -> jax.Array:
    """f32 values rounded to bf16's precision: a kernel's f32 matmul at the default precision
    (one bf16 pass, as the judge's interpreter computes it) multiplies them exactly, so a test
    about which blocks are run compares with an f32 reference without the MXU's rounding."""
    return values.astype(jnp.bfloat16).astype(jnp.float32)
