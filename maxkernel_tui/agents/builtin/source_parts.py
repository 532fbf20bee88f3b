"""Fixed pieces of every generated kernel file as text: imports, VMEM constants, helpers (taken
from the real code in pieces/), index maps (one line each, from the table below).

Text, because each file stands alone: the harness loads a candidate with nothing but jax and
numpy importable. Imports jax through pieces/.
"""

from __future__ import annotations

from maxkernel_tui.agents.builtin.pieces import (
    blocks,
    function_source,
    groups,
    matmul,
    rowwise,
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


# The helpers, from the real code in pieces/ (copied into each file, never imported by it).
VMEM_CONSTANTS = section_source(blocks, "vmem")
PICK_BLOCK = function_source(blocks._pick_block)
BLOCK_BYTES = function_source(blocks._block_bytes)
COMPILER_PARAMS = function_source(blocks._compiler_params)
FIT_BLOCKS = function_source(blocks._fit_blocks)
FIT_ROWS = function_source(blocks._fit_rows)
GROUP_TOTALS = function_source(groups._group_totals)
# The matmul stage: kernel and wrapper, parameterised, run with each stage's parameters.
MATMUL_STAGE = "\n\n".join(
    function_source(f)
    for f in (
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
        matmul._matmul_stage,
    )
)
# The row-wise stage: its wrapper, parameterised, run with each stage's parameters.
ROWWISE_STAGE = "\n\n".join(
    function_source(f)
    for f in (
        rowwise._tile_block_2d,
        rowwise._row_block_2d,
        rowwise._col_block_2d,
        rowwise._scalar_block_2d,
        rowwise._rowwise_block,
        rowwise._rowwise_stage,
    )
)

# Index maps of the stages without a piece of their own (pieces/matmul.py and rowwise.py have
# theirs), by grid: column reduction (j, i): row blocks innermost, and convolution (b, i, j).
# Each entry: role -> (block index, description).
COLUMN_REDUCTION_GRID = ("j", "i")
IMAGE_GRID = ("b", "i", "j")  # convolution: image b, out-channel block i, one block of all pixels

_INDEX_MAPS = {
    "tile": ("i, j", "Tile (i, j): row block i, column block j."),
    "row": ("i, 0", "One value per row: row block i."),
    "col": ("0, j", "One value per column: column block j."),
    "scalar": ("0, 0", "A single value, the same block at every step."),
    "image": ("0, 0, 0", "The whole image: its column-shifted copies, every channel, every pixel."),
    "taps": ("0, i, 0", "Every tap's weights of out-channel block i."),
}


def index_map_name(role: str, grid: tuple[str, ...], batched_operand: bool) -> str:
    suffix = {
        COLUMN_REDUCTION_GRID: "_rows_inner",
        IMAGE_GRID: "_per_image" if batched_operand else "_all_images",
    }[grid]
    return f"_{role}_block{suffix}"


def index_map_source(role: str, grid: tuple[str, ...], batched_operand: bool) -> str:
    returned, description = _INDEX_MAPS[role]
    if batched_operand:
        returned = f"b, {returned}"
        description = f"{description} Batch entry b."
    return (
        f"def {index_map_name(role, grid, batched_operand)}({', '.join(grid)}):\n"
        f'    """{description}"""\n'
        f"    return {returned}\n"
    )
