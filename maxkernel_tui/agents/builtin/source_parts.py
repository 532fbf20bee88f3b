"""Fixed pieces of every generated kernel file as text: imports, VMEM constants, and each
family's parameterised stage with its helpers, taken from the real code in pieces/.

Text, because each file stands alone: the harness loads a candidate with nothing but jax and
numpy importable. Imports jax through pieces/.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

from maxkernel_tui.agents.builtin.pieces import (
    attention,
    blocks,
    conv,
    conv_pixels,
    conv_transposed,
    conv_volume,
    function_source,
    grouped,
    groups,
    matmul,
    mla,
    moe,
    paged_attention,
    ragged_paged_attention,
    retention,
    rowwise,
    running,
    section_source,
)

JAX_IMPORTS = """\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
"""


def imports(*standard: str) -> str:
    """The file's imports: the standard-library modules it uses, then jax and Pallas."""
    head = "".join(f"import {module}\n" for module in sorted(standard))
    return head + ("\n" if head else "") + JAX_IMPORTS


# The helpers every file carries, from the real code in pieces/ (copied, never imported).
VMEM_CONSTANTS = section_source(blocks, "vmem")
COMMON = (blocks._pick_block, blocks._block_bytes, blocks._compiler_params, blocks._mxu_dot)
GROUP_TOTALS = (groups._group_totals,)
ROW_GROUP_TOTALS = (groups._row_group_totals,)
# Each family's stage, parameterised: the functions a file running it carries, in order.
MATMUL_STAGE = (
    blocks._fit_blocks,
    matmul._accumulate_products,
    matmul._matmul_kernel,
    matmul._lhs_block,
    matmul._rhs_block,
    matmul._rhs_t_block,
    matmul._tile_block,
    matmul._row_block,
    matmul._col_block,
    matmul._scalar_block,
    matmul._role_block,
    matmul._role_bytes,
    matmul._blocks_bytes,
    matmul._matmul_stage,
)
# A matmul whose row-wise epilogue carries running statistics across column blocks.
RUNNING_STAGE = (
    blocks._fit_blocks,
    matmul._accumulate_products,
    matmul._lhs_block,
    matmul._rhs_block,
    matmul._rhs_t_block,
    matmul._tile_block,
    matmul._row_block,
    matmul._col_block,
    matmul._scalar_block,
    matmul._role_block,
    matmul._role_bytes,
    matmul._blocks_bytes,
    running._running_kernel,
    running._running_matmul_stage,
)
# Row-wise stages and column reductions (`accumulators`) both run `_rowwise_stage`.
ROWWISE_STAGE = (
    blocks._fit_rows,
    rowwise._tile_block_2d,
    rowwise._row_block_2d,
    rowwise._col_block_2d,
    rowwise._scalar_block_2d,
    rowwise._rowwise_block,
    rowwise._rows_inner,
    rowwise._column_reduction_kernel,
    rowwise._rowwise_stage,
)
# The same over images (what follows a convolution, batch statistics among it).
BATCHED_ROWWISE_STAGE = (*ROWWISE_STAGE[:-1], rowwise._batched_rowwise_stage, *ROWWISE_STAGE[-1:])
# The convolution reads its epilogue's operands by rowwise.py's roles.
CONV_STAGE = (
    rowwise._tile_block_2d,
    rowwise._row_block_2d,
    rowwise._col_block_2d,
    rowwise._scalar_block_2d,
    rowwise._rowwise_block,
    conv._conv_kernel,
    conv._flatten_image,
    conv._plane_patches,
    conv._convolve_patches,
    conv._store_rows,
    conv._convolve_planes,
    conv._epilogue_in_blocks,
    conv._image_block,
    conv._image_planes_block,
    conv._taps_block,
    conv._image_role_block,
    conv._conv_stage,
    conv._fit_conv_rows,
    conv._chunking,
)
# A 2-D convolution written pixels-major, its epilogue on (pixels * batch, channels) blocks.
PIXELS_MAJOR_CONV_STAGE = (
    conv_pixels._pixels_major_kernel,
    conv_pixels._whole_block,
    conv_pixels._pixels_major_conv_stage,
    conv_pixels._pixels_first,
    conv_pixels._pixels_first_kernel,
    conv_pixels._fit_pixel_block,
)
# A 3-D convolution: conv.py's taps of a plane, one output plane per grid step.
VOLUME_CONV_STAGE = (
    rowwise._tile_block_2d,
    rowwise._row_block_2d,
    rowwise._col_block_2d,
    rowwise._scalar_block_2d,
    rowwise._rowwise_block,
    conv._store_rows,
    conv._convolve_planes,
    conv._epilogue_in_blocks,
    conv._fit_conv_rows,
    conv._chunking,
    conv_volume._volume_conv_kernel,
    conv_volume._volume_taps_block,
    conv_volume._volume_in_specs,
    conv_volume._volume_operand_block,
    conv_volume._volume_conv_stage,
)
# A transposed 3-D convolution: per depth index, every phase's output plane (conv_transposed.py).
TRANSPOSED_VOLUME_CONV_STAGE = (
    rowwise._tile_block_2d,
    rowwise._row_block_2d,
    rowwise._col_block_2d,
    rowwise._scalar_block_2d,
    rowwise._rowwise_block,
    conv._epilogue_in_blocks,
    conv._fit_conv_rows,
    conv._chunking,
    conv_volume._volume_taps_block,
    conv_volume._volume_in_specs,
    conv_volume._volume_operand_block,
    conv_transposed._axis_phases,
    conv_transposed._phase_taps,
    conv_transposed._interleaved,
    conv_transposed._interleaved_blocks,
    conv_transposed._transposed_plane,
    conv_transposed._transposed_volume_kernel,
    conv_transposed._transposed_volume_conv_stage,
)
FLASH_ATTENTION = (
    attention._last_kv_block,
    attention._start_statistics,
    attention._block_logits,
    attention._causal_mask,
    attention._online_softmax_step,
    attention._finish_output,
    attention._attention_kernel,
    attention._flash_attention,
)
# The decayed scan over chunk pairs: its module-level names, then its functions.
RETENTION_CONSTANTS = section_source(retention, "retention")
RETENTION = (
    attention._last_kv_block,
    retention._decay_block,
    retention._start_scan_state,
    retention._retention_kernel,
    retention._retention,
)
# The decayed scan whose row statistic is linear: one pass over the chunks, a carried state.
STATE_SCAN = (
    retention._decay_block,
    retention._start_carried_state,
    retention._state_scan_kernel,
    retention._state_scan,
)

# A grouped matmul over consecutive row groups, and the routed MoE that runs two of them.
GROUPED_MATMUL = (
    blocks._fit_blocks,
    grouped._group_items,
    grouped._grouped_kernel,
    grouped._first_accumulator,
    grouped._grouped_matmul,
)
ROUTED_MOE = (moe._silu_gate, moe._routed_moe)

# The MLA layer's glue and its projection: run with MATMUL_STAGE and FLASH_ATTENTION.
MLA_LAYER = (mla._store_block, mla._project, mla._rope_tables, mla._rotate, mla._mla_layer)
# Paged decode attention, with attention.py's online-softmax steps.
PAGED_MASK = section_source(paged_attention, "paged mask")
PAGED_ATTENTION = (
    attention._start_statistics,
    attention._online_softmax_step,
    attention._finish_output,
    paged_attention._pages_per_block,
    paged_attention._page_of_slot,
    paged_attention._head_and_token_mask,
    paged_attention._paged_decode_kernel,
    paged_attention._paged_attention,
)

# Ragged paged attention (mixed prefill and decode): work items of query block and sequence.
RAGGED_PAGED_ATTENTION = (
    paged_attention._pages_per_block,
    ragged_paged_attention._work_items,
    ragged_paged_attention._item_last_page,
    ragged_paged_attention._ragged_kernel,
    ragged_paged_attention._ragged_paged_attention,
)


def functions_source(*pieces: tuple[Callable[..., Any], ...]) -> list[str]:
    """The source of every function of `pieces` (the common helpers first), each once, in
    order, exactly as written in pieces/."""
    functions = dict.fromkeys(function for piece in (COMMON, *pieces) for function in piece)
    return [function_source(function) for function in functions]


def kernel_docstring(kind: str, plan: str) -> str:
    """A generated file's docstring: which kernel, that the agent wrote it from the reference's
    jaxpr alone, and its plan, wrapped."""
    opening = (
        f'"""{kind} kernel, written by the built-in agent of maxkernel-tui from the '
        "reference's jaxpr (no task name or id was consulted)."
    )
    lines = textwrap.wrap(opening, 96, break_on_hyphens=False)
    return "\n".join([*lines, "", *textwrap.wrap(plan, 96), '"""'])
