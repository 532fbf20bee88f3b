"""Group statistics on the lane-dense tile layout: the helpers a kernel with a group norm carries
(sums over groups of adjacent columns, or of adjacent rows: a convolution's channels). Imports
jax.
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


# fmt: off
def _row_group_totals(column, width):
    """Each row gets the sum over its group of `width` adjacent rows: (tm, 1) -> (tm, 1).
    A 0/1 matrix of same-group rows times the column spread over one lane tile, at full f32
    precision (no reshape across sublanes, which Mosaic lays out poorly)."""
    rows = column.shape[0]
    row = jax.lax.broadcasted_iota(jnp.int32, (rows, rows), 0)
    other = jax.lax.broadcasted_iota(jnp.int32, (rows, rows), 1)
    same_group = (jax.lax.div(row, width) == jax.lax.div(other, width)).astype(jnp.float32)
    spread = jnp.broadcast_to(column.astype(jnp.float32), (rows, 128))
    totals = jnp.dot(
        same_group, spread, preferred_element_type=jnp.float32,
        precision=jax.lax.Precision.HIGHEST,
    )
    return totals[:, :1].astype(column.dtype)
# fmt: on
