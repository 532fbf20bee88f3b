"""What a fake porter answers for the softmax sources of tests/data/porting: a JAX reference in
the plain format, in one fenced block after a sentence."""

from __future__ import annotations


def softmax_reference(batch_size: int, dim: int) -> str:
    return f"""import jax
import jax.numpy as jnp


def get_inputs(dtype=jnp.float32):
    batch_size = {batch_size}
    dim = {dim}
    x = jax.random.normal(jax.random.key(0), (batch_size, dim), dtype=dtype)
    return [x], []


def computation(x):
    return jax.nn.softmax(x, axis=1)
"""


def porter_answer(reference: str, said: str = "The kernel is a row-wise softmax.") -> str:
    return f"{said}\n\n```python\n{reference}```\n"
