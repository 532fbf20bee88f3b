"""Block sizes and VMEM: the helpers every generated kernel file carries (copied into it by
render.py and attention_render.py). Imports jax: the helpers run as the generated file runs them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental.pallas import tpu as pltpu

# piece: vmem
# Scoped VMEM a kernel gets by default (v5e); a larger footprint asks for more, up to the cap
# (v5e and v6e have 128 MiB of VMEM). Blocks shrink until their footprint fits the budget.
DEFAULT_SCOPED_VMEM = 16 * 2**20
VMEM_BUDGET = 48 * 2**20
VMEM_LIMIT_CAP = 100 * 2**20
# end piece


def _pick_block(size, preferred, align):
    """The largest multiple of `align` that divides `size` and is at most `preferred`; the whole
    dimension when there is none (a block spanning a full dimension is always legal)."""
    block = min(preferred, size) // align * align
    while block >= align:
        if size % block == 0:
            return block
        block -= align
    return size


def _mxu_dot(lhs, rhs, operands, contracting=((1,), (0,))):
    """lhs @ rhs of two 2-D blocks (contracted on `contracting`), summed in f32. `operands`: how
    the MXU takes f32 operands. None keeps them: Mosaic's default precision is one bf16 pass
    (the operands rounded to bf16, measured on a v5e). "bf16" rounds them here (the same pass;
    a block cast once serves every product). "bf16x3" splits each into its bf16 rounding and
    the bf16 rounding of the rest, and adds the three products that matter: three passes, close
    to f32 (XLA's HIGH). "highest" asks Mosaic for f32 (six passes)."""

    def dot(a, b, precision=None):
        numbers = (contracting, ((), ()))
        return jax.lax.dot_general(
            a, b, numbers, preferred_element_type=jnp.float32, precision=precision
        )

    if operands == "highest":
        return dot(lhs, rhs, jax.lax.Precision.HIGHEST)
    if operands == "bf16":
        return dot(lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16))
    if operands != "bf16x3":
        return dot(lhs, rhs)
    lhs_high, rhs_high = lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16)
    small = jnp.zeros((), jnp.float32)  # the low parts' products, added first: they are small
    if lhs.dtype == jnp.float32:
        small = dot((lhs - lhs_high.astype(jnp.float32)).astype(jnp.bfloat16), rhs_high)
    if rhs.dtype == jnp.float32:
        small = small + dot(lhs_high, (rhs - rhs_high.astype(jnp.float32)).astype(jnp.bfloat16))
    return small + dot(lhs_high, rhs_high)


def _block_bytes(rows, cols, dtype):
    """VMEM bytes of a (rows, cols) block, padded to whole (sublane, 128-lane) tiles."""
    itemsize = jnp.dtype(dtype).itemsize
    sublanes = 8 * max(1, 4 // itemsize)
    return -(-rows // sublanes) * sublanes * (-(-cols // 128) * 128) * itemsize


def _compiler_params(semantics, footprint):
    """Ask for more than the default scoped VMEM only when the blocks need it."""
    limit = None
    if footprint > DEFAULT_SCOPED_VMEM:
        limit = min(max(2 * footprint, 32 * 2**20), VMEM_LIMIT_CAP)
    return pltpu.CompilerParams(dimension_semantics=semantics, vmem_limit_bytes=limit)


def _fit_blocks(rows, depth, tm, tk, row_align, footprint, min_depth=256):
    """Shrink the depth step (down to `min_depth`), then the row block, until the footprint
    fits. Blocks of whole rows take a shorter depth step rather than fewer rows: each row block
    reads the whole weight once more."""
    while footprint(tm, tk) > VMEM_BUDGET:
        smaller_tk = _pick_block(depth, tk // 2, 128)
        smaller_tm = _pick_block(rows, tm // 2, row_align)
        if tk > min_depth and smaller_tk < tk:
            tk = smaller_tk
        elif smaller_tm < tm:
            tm = smaller_tm
        else:
            break
    return tm, tk


def _fit_rows(rows, tm, row_align, footprint):
    """Shrink the row block until the footprint fits."""
    while footprint(tm) > VMEM_BUDGET:
        smaller = _pick_block(rows, tm // 2, row_align)
        if smaller >= tm:
            break
        tm = smaller
    return tm
