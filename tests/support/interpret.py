"""Running the built-in agent's pieces directly in TPU interpret mode, as the piece tests do:
uninitialised VMEM reads as NaN and a read out of bounds raises, so a kernel that reads what it
never wrote or past a block cannot pass by luck."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental.pallas import tpu as pltpu

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")


def normal(*shape: int, dtype: Any = jnp.float32, seed: int = 0) -> jax.Array:
    """Standard normal values of this shape and dtype."""
    return jax.random.normal(jax.random.key(seed), shape, dtype)


def interpreted(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)` with every pallas_call in TPU interpret mode, finished."""
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        return jax.block_until_ready(function(*args, **kwargs))
