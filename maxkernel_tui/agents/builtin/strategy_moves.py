"""How the built-in agent applies a graph search's strategy: as a change of the tunables a kernel
declares under `# Tunables` (block sizes per axis, and, where the kernel declares them, its
buffer count and whether a row-wise epilogue is fused), or of a matmul's operand precision where
the task's tolerance allows it. A strategy that needs another structure (manual DMA, a new grid
axis, crossover of two kernels) has no move here, and the agent says so instead of offering the
same kernel again. No jax here."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from maxkernel_tui.agents.builtin.operand_precision import OperandPrecision
from maxkernel_tui.agents.roles.tunables import find_tunables, set_tunables

Sizes = dict[str, int]

ROW_BLOCKS = ("BLOCK_ROWS", "BLOCK_Q")  # the second-to-last block dimension (M)
COL_BLOCKS = ("BLOCK_COLS", "BLOCK_KV")  # the last block dimension (N)
DEPTH_BLOCKS = ("BLOCK_DEPTH",)  # the contraction (K)
SMALLEST, LARGEST = 8, 8192  # a sublane's rows; beyond this no block fits VMEM
# Switches a kernel may declare beside its block sizes; absent, their strategies have no move.
BUFFER_COUNT = "BUFFER_COUNT"  # buffers per streamed block (pl.Buffered); 2 is the default
FEWEST_BUFFERS, MOST_BUFFERS = 1, 3
FUSED_EPILOGUE = "FUSE_EPILOGUE"  # 1: the row-wise stages run in the matmul's kernel
PRECISION = "bf16-operands"  # the one move on the calls, not on the tunables
# The calls of the built-in agent's pieces that run a matmul (one operand precision each).
_MXU_CALLS = ("_matmul_stage", "_conv_stage")
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


def _stepped(name: str, step: int, low: int, high: int) -> Callable[[Sizes], Sizes]:
    def move(sizes: Sizes) -> Sizes:
        return {name: min(high, max(low, sizes[name] + step))} if name in sizes else {}

    return move


def _switched(name: str, on: bool) -> Callable[[Sizes], Sizes]:
    def move(sizes: Sizes) -> Sizes:
        return {name: int(on)} if name in sizes else {}

    return move


MOVES: dict[str, Callable[[Sizes], Sizes]] = {
    "grow-row-blocks": _scaled(ROW_BLOCKS, 2),
    "shrink-row-blocks": _scaled(ROW_BLOCKS, 0.5),
    "grow-col-blocks": _scaled(COL_BLOCKS, 2),
    "shrink-col-blocks": _scaled(COL_BLOCKS, 0.5),
    "grow-depth-blocks": _scaled(DEPTH_BLOCKS, 2),
    "square-output-tiles": _square,
    "whole-k": _scaled(DEPTH_BLOCKS, 4),  # the file shrinks it to the whole depth when K is small
    "split-k": _scaled(DEPTH_BLOCKS, 0.5),
    "fewer-grid-steps": _scaled(ROW_BLOCKS + COL_BLOCKS + DEPTH_BLOCKS, 2),
    "deeper-pipeline": _stepped(BUFFER_COUNT, 1, FEWEST_BUFFERS, MOST_BUFFERS),
    "shallower-pipeline": _stepped(BUFFER_COUNT, -1, FEWEST_BUFFERS, MOST_BUFFERS),
    "fuse-rowwise-epilogue": _switched(FUSED_EPILOGUE, True),
    "split-fused-stages": _switched(FUSED_EPILOGUE, False),
}
# What a switch's strategy needs the kernel to declare, named when it does not.
_NEEDS = {
    "deeper-pipeline": BUFFER_COUNT,
    "shallower-pipeline": BUFFER_COUNT,
    "fuse-rowwise-epilogue": FUSED_EPILOGUE,
    "split-fused-stages": FUSED_EPILOGUE,
}


class NoMove(Exception):
    """The strategy changes nothing the agent can change in this kernel; the message says why."""


def known_strategies() -> tuple[str, ...]:
    """Every strategy the agent has a move for, in a fixed order."""
    return (*MOVES, PRECISION)


def apply_strategy(
    source: str, strategy: str, allowed: Sequence[OperandPrecision] | None = None
) -> tuple[str, str]:
    """(the kernel with the strategy's change, what changed in words); NoMove when the strategy
    has no move or its move changes nothing in this kernel. `allowed`: the operand precision
    per matmul that the task's tolerance check chose (operand_precision.PrecisionChoice);
    without it the precision move is never made."""
    if strategy == PRECISION:
        return _precision_move(source, allowed)
    declared = find_tunables(source)
    move = MOVES.get(strategy)
    if move is None:
        raise NoMove(
            f"the built-in agent has no move for strategy {strategy!r}: it changes the tunables "
            f"a kernel declares and the operand precision, only for "
            f"{', '.join(sorted(known_strategies()))}"
        )
    if strategy in _NEEDS and _NEEDS[strategy] not in declared:
        raise NoMove(
            f"strategy {strategy!r} needs the kernel to declare the tunable {_NEEDS[strategy]} "
            f"and it declares {', '.join(declared) or 'none'}"
        )
    changed = {n: v for n, v in move(declared).items() if declared.get(n) != v}
    if not changed:
        raise NoMove(
            f"strategy {strategy!r} changes nothing in this kernel (its tunables: "
            f"{', '.join(f'{n} = {v}' for n, v in declared.items()) or 'none declared'})"
        )
    words = ", ".join(f"{n} {declared[n]} → {v}" for n, v in changed.items())
    return set_tunables(source, changed), words


def no_move(source: str, strategy: str) -> str | None:
    """Why `strategy` has no move on `source`, as far as the kernel alone tells (no tolerance
    check here: a precision move the kernel leaves room for is left to the agent's worker)."""
    try:
        if strategy == PRECISION:
            _unset_calls(source)
        else:
            apply_strategy(source, strategy)
    except NoMove as reason:
        return str(reason)
    return None


def _mxu_calls(source: str) -> list[ast.Call]:
    """The matmul calls of the kernel's `computation`, in program order."""
    tree = ast.parse(source)
    computation = next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "computation"), None
    )
    if computation is None:
        return []
    calls = [
        n
        for n in ast.walk(computation)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _MXU_CALLS
    ]
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def _unset_calls(source: str) -> list[int]:
    """The indices of the matmul calls that keep their operands' own dtype (no `operands=`);
    NoMove when there are none."""
    calls = _mxu_calls(source)
    if not calls:
        raise NoMove("the kernel runs no matmul through the built-in agent's pieces")
    unset = [i for i, c in enumerate(calls) if all(k.arg != "operands" for k in c.keywords)]
    if not unset:
        raise NoMove("every matmul of the kernel already states its operand precision")
    return unset


def _precision_move(source: str, allowed: Sequence[OperandPrecision] | None) -> tuple[str, str]:
    """bf16 operands on each matmul that keeps its own dtype and that the tolerance check let
    have bf16; never one it did not."""
    unset = _unset_calls(source)
    calls = _mxu_calls(source)
    if allowed is None or len(allowed) != len(calls):
        raise NoMove(
            "the tolerance check's operand precision for this kernel's matmuls is not known "
            f"({len(calls)} matmuls, {'no choice' if allowed is None else len(allowed)} chosen)"
        )
    lowered = [i for i in unset if allowed[i] == OperandPrecision.BF16]
    if not lowered:
        kept = ", ".join(f"matmul {i + 1}: {allowed[i]}" for i in unset)
        raise NoMove(f"the task's tolerance check keeps f32 operands where they are ({kept})")
    lines = source.splitlines(keepends=True)
    for i in reversed(lowered):  # from the end, so earlier positions stay valid
        call = calls[i]
        assert call.end_lineno is not None and call.end_col_offset is not None
        line = lines[call.end_lineno - 1].encode()  # ast's offsets count UTF-8 bytes
        cut = call.end_col_offset - 1  # the call's closing parenthesis
        lines[call.end_lineno - 1] = (line[:cut] + b", operands='bf16'" + line[cut:]).decode()
    words = ", ".join(f"matmul {i + 1} f32 → bf16 operands" for i in lowered)
    return "".join(lines), f"{words} (the tolerance check allows them)"
