"""The engineer's review of a port on a terminal (`tasks import` of a CUDA or Triton file with
no PyTorch comparison to decide): the source and the porter's JAX reference side by side, then
a yes or no. Wire it as `PorterImporter(client, approve_on_terminal)`."""

from __future__ import annotations

import shutil
from collections.abc import Callable

from maxkernel_tui.agents.porting import Review
from maxkernel_tui.kernels.porting.side_by_side import side_by_side

_PROMPT = "Write this reference as the task's? [y/N] > "


def approve_on_terminal(
    review: Review,
    ask: Callable[[str], str] = input,
    show: Callable[[str], None] = print,
) -> bool:
    """Shows `review` and asks; anything but y/yes (end of input included) is a no."""
    width = shutil.get_terminal_size((160, 40)).columns
    show(f"── The porter's reference for {review.path.name} needs your approval: {review.reason}")
    show(side_by_side(review.source, review.reference, width, (review.path.name, "reference.py")))
    try:
        return ask(_PROMPT).strip().lower() in ("y", "yes")
    except EOFError:
        return False
