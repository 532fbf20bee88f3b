"""Fixed pieces of every generated kernel file: imports, VMEM constants, helpers, index maps.

Kept as text: they are copied into each file, so each file stands alone (the harness loads a
candidate with nothing but jax and numpy importable).
"""

from __future__ import annotations

JAX_IMPORTS = """\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
"""


def imports(standard: list[str]) -> str:
    """The file's imports: the standard-library modules it uses, then jax and Pallas."""
    head = "".join(f"import {module}\n" for module in sorted(standard))
    return head + ("\n" if head else "") + JAX_IMPORTS


VMEM_CONSTANTS = """\
# Scoped VMEM a kernel gets by default (v5e); a larger footprint asks for more, up to the cap
# (v5e and v6e have 128 MiB of VMEM). Blocks shrink until their footprint fits the budget.
DEFAULT_SCOPED_VMEM = 16 * 2**20
VMEM_BUDGET = 48 * 2**20
VMEM_LIMIT_CAP = 100 * 2**20
"""

PICK_BLOCK = '''\
def _pick_block(size, preferred, align):
    """The largest multiple of `align` that divides `size` and is at most `preferred`; the whole
    dimension when there is none (a block spanning a full dimension is always legal)."""
    block = min(preferred, size) // align * align
    while block >= align:
        if size % block == 0:
            return block
        block -= align
    return size
'''

BLOCK_BYTES = '''\
def _block_bytes(rows, cols, dtype):
    """VMEM bytes of a (rows, cols) block, padded to whole (sublane, 128-lane) tiles."""
    itemsize = jnp.dtype(dtype).itemsize
    sublanes = 8 * max(1, 4 // itemsize)
    return -(-rows // sublanes) * sublanes * (-(-cols // 128) * 128) * itemsize
'''

COMPILER_PARAMS = '''\
def _compiler_params(semantics, footprint):
    """Ask for more than the default scoped VMEM only when the blocks need it."""
    limit = None
    if footprint > DEFAULT_SCOPED_VMEM:
        limit = min(max(2 * footprint, 32 * 2**20), VMEM_LIMIT_CAP)
    return pltpu.CompilerParams(dimension_semantics=semantics, vmem_limit_bytes=limit)
'''

FIT_BLOCKS = '''\
def _fit_blocks(rows, depth, tm, tk, row_align, footprint):
    """Shrink the depth step (down to 256), then the row block, until the footprint fits."""
    while footprint(tm, tk) > VMEM_BUDGET:
        smaller_tk = _pick_block(depth, tk // 2, 128)
        smaller_tm = _pick_block(rows, tm // 2, row_align)
        if tk > 256 and smaller_tk < tk:
            tk = smaller_tk
        elif smaller_tm < tm:
            tm = smaller_tm
        else:
            break
    return tm, tk
'''

FIT_ROWS = '''\
def _fit_rows(rows, tm, row_align, footprint):
    """Shrink the row block until the footprint fits."""
    while footprint(tm) > VMEM_BUDGET:
        smaller = _pick_block(rows, tm // 2, row_align)
        if smaller >= tm:
            break
        tm = smaller
    return tm
'''

GROUP_TOTALS = '''\
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
    totals = jnp.dot(chunks, same_group, precision=jax.lax.Precision.HIGHEST,
                     preferred_element_type=jnp.float32)
    return totals.reshape(rows, cols).astype(tile.dtype)
'''

# Index maps, by grid: matmul (i, j, k), batched matmul (b, i, j, k), element-wise (i, j), and
# column reduction (j, i): row blocks innermost. Each entry: role -> (block index, description).
MATMUL_GRID = ("i", "j", "k")
BATCHED_GRID = ("b", "i", "j", "k")
ELEMENTWISE_GRID = ("i", "j")
COLUMN_REDUCTION_GRID = ("j", "i")
IMAGE_GRID = ("b", "i", "j")  # convolution: image b, out-channel block i, one block of all pixels

_INDEX_MAPS = {
    "lhs": ("i, k", "Row block i of the left operand, depth step k."),
    "rhs": ("k, j", "Depth step k, column block j of a (depth, cols) weight."),
    "rhs_t": ("j, k", "Column block j, depth step k of a weight stored (cols, depth)."),
    "tile": ("i, j", "Tile (i, j): row block i, column block j."),
    "row": ("i, 0", "One value per row: row block i."),
    "col": ("0, j", "One value per column: column block j."),
    "scalar": ("0, 0", "A single value, the same block at every step."),
    "image": ("0, 0, 0", "The whole image: its column-shifted copies, every channel, every pixel."),
    "taps": ("0, i, 0", "Every tap's weights of out-channel block i."),
}


def index_map_name(role: str, grid: tuple[str, ...], batched_operand: bool) -> str:
    suffix = {
        MATMUL_GRID: "",
        BATCHED_GRID: "_batched" if batched_operand else "_shared",
        ELEMENTWISE_GRID: "_ew",
        COLUMN_REDUCTION_GRID: "_rows_inner",
        IMAGE_GRID: "_per_image" if batched_operand else "_all_images",
    }[grid]
    return f"_{role}_block{suffix}"


def index_map_source(role: str, grid: tuple[str, ...], batched_operand: bool) -> str:
    returned, description = _INDEX_MAPS[role]
    if "k" not in grid:
        returned = returned.replace("k", "0")
    if batched_operand:
        returned = f"b, {returned}"
        description = f"{description} Batch entry b."
    return (
        f"def {index_map_name(role, grid, batched_operand)}({', '.join(grid)}):\n"
        f'    """{description}"""\n'
        f"    return {returned}\n"
    )
