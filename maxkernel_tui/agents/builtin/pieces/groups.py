"""Group statistics on the lane-dense tile layout: the helper a kernel with a group norm (or any
sum over groups of adjacent columns) carries. Imports jax.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp


# fmt: off
def _group_totals(tile, width):
    """Each column gets the sum over its group of `width` adjacent columns: (tm, tn) -> (tm, tn).
    Done on the MXU as chunks of whole groups times a block-diagonal 0/1 matrix, so the tile keeps
    its lane-dense layout (a reshape to (..., width) would waste lanes when width < 128)."""
    rows, cols = tile.shape
    chunk = width * 128 // math.gcd(width, 128)
    if cols % chunk:
        chunk = cols
    lane = jax.lax.broadcasted_iota(jnp.int32, (chunk, chunk), 0)
    other = jax.lax.broadcasted_iota(jnp.int32, (chunk, chunk), 1)
    same_group = (jax.lax.div(lane, width) == jax.lax.div(other, width)).astype(jnp.float32)
    chunks = tile.astype(jnp.float32).reshape(rows * (cols // chunk), chunk)
    # The 0/1 matrix is exact in bf16, so three bf16 parts of the f32 values (24 bits of
    # mantissa) give f32 sums in three one-pass products instead of HIGHEST's six.
    same_group = same_group.astype(jnp.bfloat16)
    totals = jnp.zeros(chunks.shape, jnp.float32)
    for _ in range(3):
        part = chunks.astype(jnp.bfloat16)
        chunks = chunks - part.astype(jnp.float32)
        totals = totals + jnp.dot(part, same_group, preferred_element_type=jnp.float32)
    return totals.reshape(rows, cols).astype(tile.dtype)
# fmt: on
