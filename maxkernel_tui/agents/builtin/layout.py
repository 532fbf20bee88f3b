"""How a value of the reference maps onto a kernel's 2-D tiles.

A stage of the kernel works on a frame: (optional batch dims,) row dims flattened into the tile's
rows, and one column dim on the lanes. Relative to a frame every value is one kind:
  tile       (rows, cols), or grouped (rows, groups..., width) with groups * width == cols
  row        (rows,) or (rows, 1): one number per row, e.g. a row max
  col        (cols,) or (1, cols): one number per column, e.g. a bias
  scalar     () or (1,): one number
  group_row  (rows, groups...): one number per row and group of `width` contiguous columns
  row_group  (groups,) of a single row dim split (groups, width): one number per group of
             `width` adjacent rows (a group norm over a convolution's channels)
  periodic_col  (width,) or (..., width): one number per column position within every group
             of `width` adjacent columns, the trailing axes of a convolution's pixels (a
             LayerNorm's weights over the width); in a convolution's stage only
Size-1 axes are ignored. Inside the kernel every kind is a 2-D array: (tm, tn), (tm, 1), (1, tn),
(1, 1) and (tm, tn // width), and a row group (tm, 1) with every row holding its group's value;
outside, the stage's operands are reshaped to the same 2-D forms
(3-D with a leading batch axis).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from maxkernel_tui.agents.builtin.dims import Dim, ShapeRuleError

TILE, ROW, COL, SCALAR, GROUP_ROW = "tile", "row", "col", "scalar", "group_row"
ROW_GROUP, PERIODIC_COL = "row_group", "periodic_col"
_RANK = {SCALAR: 0, ROW: 1, ROW_GROUP: 1, COL: 1, PERIODIC_COL: 1, GROUP_ROW: 2, TILE: 3}


@dataclass(frozen=True)
class Kind:
    name: str
    width: Dim | None = None  # group width: for group rows, and tiles seen as groups; rows per
    # group for row groups
    batched: bool = False  # has the frame's batch dims (else shared by every batch entry)

    @property
    def spans_rows(self) -> bool:
        return self.name in (TILE, ROW, GROUP_ROW, ROW_GROUP)

    @property
    def spans_cols(self) -> bool:
        return self.name in (TILE, COL, GROUP_ROW, PERIODIC_COL)


@dataclass(frozen=True)
class Frame:
    batch: tuple[Dim, ...]
    rows: tuple[Dim, ...]
    cols: Dim

    def __post_init__(self) -> None:
        if not self.rows:
            raise ShapeRuleError("a stage needs at least one row dimension")

    @property
    def ambiguous(self) -> bool:
        """Whether the column size equals a row or batch size in both traces: then a value that
        is not a whole tile could be read as rows or as columns (see classify)."""
        return self.cols in self.rows or self.cols in self.batch

    @staticmethod
    def of(shape: tuple[Dim, ...], batch_rank: int = 0) -> Frame:
        """The frame a value spans: its non-unit axes, the last one as the columns."""
        dims = [d for d in shape if not d.is_one()]
        if len(dims) < batch_rank + 2:
            raise ShapeRuleError(f"a value of rank {len(dims)} has no (rows, columns) to tile")
        return Frame(tuple(dims[:batch_rank]), tuple(dims[batch_rank:-1]), dims[-1])

    @property
    def row_count(self) -> Dim:
        return product_of(self.rows)

    @property
    def batch_count(self) -> Dim:
        return product_of(self.batch)


def classify(shape: tuple[Dim, ...], frame: Frame) -> Kind | None:
    """The kind of a value of this shape in `frame`, or None when it does not fit."""
    dims = [d for d in shape if not d.is_one()]
    if frame.ambiguous:  # only a whole tile is unmistakable there (e.g. a (c, n, n) matmul result)
        whole = [*frame.batch, *frame.rows, frame.cols]
        return Kind(TILE, batched=bool(frame.batch)) if dims == whole else None
    batched = bool(frame.batch) and dims[: len(frame.batch)] == list(frame.batch)
    if batched:
        dims = dims[len(frame.batch) :]
    rows = list(frame.rows)
    if dims[: len(rows)] == rows:
        rest, has_rows = dims[len(rows) :], True
    elif len(rows) > 1 and dims[:1] == [frame.row_count]:
        rest, has_rows = dims[1:], True
    elif len(rows) == 1 and len(dims) > 2 and dims[0] * dims[1] == rows[0]:
        rest, has_rows = dims[2:], True  # the rows split in groups: (groups, width, ...)
    else:
        rest, has_rows = dims, False
    if not rest:
        return Kind(ROW if has_rows else SCALAR, batched=batched)
    if rest == [frame.cols]:
        return Kind(TILE if has_rows else COL, batched=batched)
    if not has_rows and len(rest) >= 2 and product_of(rest) == frame.cols:
        return Kind(COL, batched=batched)  # a convolution's pixels as (height, width) or more
    if not has_rows and len(rest) == 1 and len(rows) == 1:
        per_group = rows[0].divided_by(rest[0])
        if per_group is not None and not per_group.is_one():
            return Kind(ROW_GROUP, per_group, batched)
    if has_rows and len(rest) >= 2 and product_of(rest) == frame.cols:
        return Kind(TILE, rest[-1], batched)  # (height, width) or (depth, height, width)
    if has_rows:
        width = frame.cols.divided_by(product_of(rest))
        if width is not None and not width.is_one():
            return Kind(GROUP_ROW, width, batched)
    return _periodic(shape, rest, frame) if not has_rows and not batched else None


def _periodic(shape: tuple[Dim, ...], rest: list[Dim], frame: Frame) -> Kind | None:
    """A value on trailing axes only (no unit axis after its first sized one, so it broadcasts
    onto the columns' last axes), whose size divides the columns: one number per position in
    every group of that many adjacent columns."""
    trailing = list(shape)
    while trailing and trailing[0].is_one():
        trailing.pop(0)
    if not trailing or any(d.is_one() for d in trailing) or trailing != rest:
        return None
    width = product_of(rest)
    times = frame.cols.divided_by(width)
    if times is None or times.is_one():
        return None
    return Kind(PERIODIC_COL, width)


def product_of(dims: tuple[Dim, ...] | list[Dim]) -> Dim:
    product = Dim.const(1)
    for dim in dims:
        product = product * dim
    return product


def join(kinds: list[Kind]) -> Kind | None:
    """The kind of an element-wise result of operands of these kinds (None: they clash)."""
    names = {k.name for k in kinds}
    if ROW_GROUP in names:
        return _join_row_groups(kinds, names)
    widths = {k.width for k in kinds if k.width is not None}
    if len(widths) > 1:
        return None
    if PERIODIC_COL in names and names & {COL, GROUP_ROW, ROW_GROUP}:
        return None  # columns of two periods: no 2-D block holds both
    if (
        {ROW, COL} <= names
        or {ROW, PERIODIC_COL} <= names
        or (GROUP_ROW in names and (COL in names or TILE in names))
    ):
        name = TILE
    else:
        name = max(names, key=_RANK.__getitem__)
    width = next(iter(widths), None) if name in (TILE, GROUP_ROW, PERIODIC_COL) else None
    return Kind(name, width, any(k.batched for k in kinds))


def _join_row_groups(kinds: list[Kind], names: set[str]) -> Kind | None:
    """A row group meets scalars (its statistics) or tiles (normalising them): the result is
    the row group, or the tile (its column grouping kept)."""
    groups = {k.width for k in kinds if k.name == ROW_GROUP}
    if len(groups) > 1 or names - {ROW_GROUP, SCALAR, TILE}:
        return None
    batched = any(k.batched for k in kinds)
    if TILE in names:
        tiles = {k.width for k in kinds if k.name == TILE}
        return Kind(TILE, next(iter(tiles)) if len(tiles) == 1 else None, batched)
    return Kind(ROW_GROUP, next(iter(groups)), batched)


def same_layout(a: Kind, b: Kind) -> bool:
    """Whether two kinds are the same 2-D array in the kernel (a tile and its grouped view are)."""
    if a.name == TILE and b.name == TILE:
        return a.batched == b.batched
    kept = (GROUP_ROW, ROW_GROUP, PERIODIC_COL)
    return replace(a, width=a.width if a.name in kept else None) == replace(
        b, width=b.width if b.name in kept else None
    )
