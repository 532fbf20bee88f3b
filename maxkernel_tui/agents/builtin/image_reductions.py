"""Reductions a convolution stage holds because its block is whole images: over groups of
adjacent output channels and every pixel (a group norm's statistics, one per image and group:
a row group), over every output channel (a logsumexp across channels, one per image and
pixel: a column), and over both (a mean of the whole image: one number per image, a batched
scalar); the stage's block spans every channel for the last two. No jax.
"""

from __future__ import annotations

from maxkernel_tui.agents.builtin.layout import COL, ROW_GROUP, SCALAR, TILE, Kind
from maxkernel_tui.agents.builtin.program import Eqn, Var


def reduces_whole_images(eqn: Eqn, source: Kind, result: Kind) -> bool:
    """Whether `eqn` reduces a convolution's tile to row groups, to columns or to one number
    within each image: the reduced axes are every axis after the kept ones (groups: what follows
    the group axis), exactly the channel axis (columns), or every axis but the image's."""
    operand = eqn.inputs[0]
    if not isinstance(operand, Var) or source.name != TILE or source.batched != result.batched:
        return False
    axes = set(eqn.params["axes"])
    sizes = [a for a, dim in enumerate(operand.shape) if not dim.is_one()]
    kept = [a for a in sizes if a not in axes]
    if result.name == ROW_GROUP:  # the totals helper sums; a group's max would need its own
        return eqn.primitive == "reduce_sum" and kept == sizes[: len(kept)]
    if result.name == SCALAR:
        return result.batched and kept == sizes[:1]
    return result.name == COL and len(sizes) - len(kept) == 1 and sizes[1] in axes


def spans_every_channel(source: Kind, result: Kind) -> bool:
    """A reduction over a convolution's channels: the stage's block must hold them all."""
    per_image = result.name == SCALAR and result.batched
    return source.name == TILE and (result.name == COL or per_image)
