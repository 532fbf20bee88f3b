"""How the built-in agent applies a graph search's strategy: as a change of the block sizes a
kernel declares under `# Tunables`, the one change it can make to a kernel. A strategy that needs
another structure (manual DMA, fusion, a new grid axis, crossover of two kernels) has no move here,
and the agent says so instead of offering the same kernel again. No jax here."""

from __future__ import annotations

from collections.abc import Callable

from maxkernel_tui.agents.roles.tunables import find_tunables, set_tunables

Sizes = dict[str, int]

ROW_BLOCKS = ("BLOCK_ROWS", "BLOCK_Q")  # the second-to-last block dimension
COL_BLOCKS = ("BLOCK_COLS", "BLOCK_KV")
DEPTH_BLOCKS = ("BLOCK_DEPTH",)
SMALLEST, LARGEST = 8, 8192  # a sublane's rows; beyond this no block fits VMEM
# Strategies a kernel of the built-in agent starts from, not a change of one.
NOT_A_CHANGE = ("", "initial")


def _scaled(names: tuple[str, ...], factor: float) -> Callable[[Sizes], Sizes]:
    def move(sizes: Sizes) -> Sizes:
        return {
            name: min(LARGEST, max(SMALLEST, int(value * factor)))
            for name, value in sizes.items()
            if name in names
        }

    return move


def _square(sizes: Sizes) -> Sizes:
    """Output tiles as large as their larger side."""
    sides = [sizes[n] for n in ROW_BLOCKS + COL_BLOCKS if n in sizes]
    if len(sides) < 2:
        return {}
    return {n: max(sides) for n in ROW_BLOCKS + COL_BLOCKS if n in sizes}


MOVES: dict[str, Callable[[Sizes], Sizes]] = {
    "grow-row-blocks": _scaled(ROW_BLOCKS, 2),
    "shrink-row-blocks": _scaled(ROW_BLOCKS, 0.5),
    "square-output-tiles": _square,
    "whole-k": _scaled(DEPTH_BLOCKS, 4),  # the file shrinks it to the whole depth when K is small
    "split-k": _scaled(DEPTH_BLOCKS, 0.5),
    "fewer-grid-steps": _scaled(ROW_BLOCKS + COL_BLOCKS + DEPTH_BLOCKS, 2),
}


class NoMove(Exception):
    """The strategy changes nothing the agent can change in this kernel; the message says why."""


def apply_strategy(source: str, strategy: str) -> tuple[str, str]:
    """(the kernel with the strategy's block sizes, what changed in words); NoMove when the
    strategy has no move or its move changes nothing in this kernel."""
    declared = find_tunables(source)
    move = MOVES.get(strategy)
    if move is None:
        raise NoMove(
            f"the built-in agent has no move for strategy {strategy!r}: it changes the block "
            f"sizes a kernel declares, and only for {', '.join(sorted(MOVES))}"
        )
    changed = {n: v for n, v in move(declared).items() if declared.get(n) != v}
    if not changed:
        raise NoMove(
            f"strategy {strategy!r} changes nothing in this kernel (its block sizes: "
            f"{', '.join(f'{n} = {v}' for n, v in declared.items()) or 'none declared'})"
        )
    words = ", ".join(f"{n} {declared[n]} → {v}" for n, v in changed.items())
    return set_tunables(source, changed), words
