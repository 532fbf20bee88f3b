"""Reductions a convolution stage holds because its block is whole images: over groups of
adjacent output channels and every pixel (a group norm's statistics, one per image and group:
a row group), and over every output channel (a logsumexp across channels, one per image and
pixel: a column; the stage's block then spans every channel). No jax.
"""

from __future__ import annotations

from maxkernel_tui.agents.builtin.layout import COL, ROW_GROUP, TILE, Kind
from maxkernel_tui.agents.builtin.program import Eqn, Var


def reduces_whole_images(eqn: Eqn, source: Kind, result: Kind) -> bool:
    """Whether `eqn` reduces a convolution's tile to row groups or to columns within each
    image: the reduced axes are every axis after the kept ones (groups: what follows the group
    axis), or exactly the channel axis (columns)."""
    operand = eqn.inputs[0]
    if not isinstance(operand, Var) or source.name != TILE or source.batched != result.batched:
        return False
    axes = set(eqn.params["axes"])
    sizes = [a for a, dim in enumerate(operand.shape) if not dim.is_one()]
    kept = [a for a in sizes if a not in axes]
    if result.name == ROW_GROUP:  # the totals helper sums; a group's max would need its own
        return eqn.primitive == "reduce_sum" and kept == sizes[: len(kept)]
    return result.name == COL and len(sizes) - len(kept) == 1 and sizes[1] in axes


def spans_every_channel(source: Kind, result: Kind) -> bool:
    """A reduction over a convolution's channels: the stage's block must hold them all."""
    return source.name == TILE and result.name == COL
