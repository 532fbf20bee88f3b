"""Which blocks each pallas_call of a pipeline must run so that the final outputs' sampled
blocks are decided, and which of them a provenance run decides. Imports jax.

The kernels that produce the program's outputs (through XLA alone) are sampled as usual; the
input regions their sampled grid points read (every index map at every sampled point and
reduction step) are pulled back through the XLA between the calls to regions of the earlier
kernels' outputs, and an earlier kernel must run every output block meeting them. An operation
whose regions are not followed here needs its operands whole. The plan decides nothing by
itself: a block it left out reads NaN in the provenance run (sampled_run.py), so a plan too
narrow costs coverage, never a wrong element counted as decided; a sampled block is decided
where every region it reads is finite there.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jax.numpy as jnp
import numpy as np

from maxkernel_tui.kernels.evaluation.region_rules import dot_regions
from maxkernel_tui.kernels.evaluation.tiles import classes
from maxkernel_tui.kernels.evaluation.tiles.blocks import (
    Region,
    block_indices,
    dim_kind,
    in_any_space,
    spans,
)
from maxkernel_tui.kernels.evaluation.tiles.faults import NotSampleable
from maxkernel_tui.kernels.evaluation.tiles.kernel_run import (
    ToProduction,
    choose_blocks,
    kernel_name,
)
from maxkernel_tui.kernels.perf.flat_program import (
    FlatProgram,
    Key,
    NotFlat,
    Step,
    flatten,
    key_of,
    scalar_operands,
)
from maxkernel_tui.kernels.perf.primitive_names import (
    AXIS_REDUCTIONS,
    CUMULATIVE_REDUCTIONS,
)

# (start, stop) per dimension, as reference/slices.py writes regions
Box = tuple[tuple[int, int], ...]
# Boxes kept per value before they are merged into the box holding them all
MAX_BOXES = 256
# An earlier kernel runs at most this many output blocks for the later kernels' samples (the
# blocks a random draw spreads over cost memory: 9p's gate and up projections) ...
MAX_PULLED_BLOCKS = 96
# ... unless the final kernels have dropped their random draw and the blocks are few grid steps
# (blocks times their reduction steps): 3p's attention needs 260 blocks of 2 steps for the
# output projection's edges
MAX_PULLED_STEPS = 1024
# A program whose outputs the XLA after its kernels makes from the whole of a kernel's output
# (a mean of each row's loss) is planned on the whole of its outputs first: a sample of blocks
# decides none of them. Every kernel block they are made of runs, where that is at most this
# many grid steps per kernel: 3t's forward over 4096 x 128256 bf16 logits in 256-row blocks is
# 2688 steps (about 20 s here), in the tuned 512-row blocks 1344 (11 s).
WHOLE_OUTPUT_STEPS = 4096


class _Whole(Exception):
    """An operation whose operands are needed whole."""


@dataclass(frozen=True)
class KernelPlan:
    """One pallas_call's sample, planned before the program runs."""

    output_axes: tuple[int, ...]
    sample: np.ndarray  # rows of output-axis ids
    opaque: frozenset[int]  # inputs (not float) computed from another kernel's outputs
    # once run: the chain of each block (kernel_run.KernelSample.chains); empty: each its own
    chains: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def plan(
    closed_jaxpr: Any, inputs: Sequence[Any], rng: np.random.Generator, random_blocks: int
) -> list[KernelPlan]:
    """Each pallas_call's sample, in the order the program runs them: the kernels that produce
    final outputs sampled as usual, the earlier ones on the blocks the later samples read. When
    the random draw spreads the final samples over more earlier blocks than can be run, the
    final kernels keep their edges and one block of each class only (no random draw)."""
    flat = _flattened(closed_jaxpr)
    kernels = flat.kernels()
    try:
        scalars = scalar_operands(flat, inputs)
        index_values = {id(s): v.index for s, v in zip(kernels, scalars, strict=True)}
    except NotFlat as refused:
        raise NotSampleable(str(refused)) from None
    if _mixed_outputs(flat):
        try:
            plans = _plan(flat, index_values, rng, random_blocks, WHOLE_OUTPUT_STEPS, whole=True)
            return [plans[id(s)] for s in kernels]
        except _TooWide:
            pass  # sampled as usual: what a sample decides, or nothing
    try:
        plans = _plan(flat, index_values, rng, random_blocks, None)
    except _TooWide:
        try:
            plans = _plan(flat, index_values, rng, 0, MAX_PULLED_STEPS)
        except _TooWide as still:
            raise NotSampleable(str(still)) from None
    return [plans[id(s)] for s in kernels]


class _TooWide(Exception):
    """An earlier kernel would run more output blocks than MAX_PULLED_BLOCKS (and, where the
    plan allows it, more grid steps than MAX_PULLED_STEPS)."""


def _plan(
    flat: FlatProgram,
    index_values: dict[int, list[np.ndarray]],
    rng: np.random.Generator,
    random_blocks: int,
    max_steps: int | None,
    *,
    whole: bool = False,
) -> dict[int, KernelPlan]:
    """`max_steps`: an earlier kernel may run more than MAX_PULLED_BLOCKS blocks in at most
    this many grid steps; None: never more. `whole`: the program's outputs are needed whole,
    and every kernel, the final ones too, runs at most `max_steps` grid steps."""
    free = _reach_outputs(flat)
    derived = _derived(flat)
    need: dict[Key, list[Box]] = {}
    if whole:
        for atom in flat.outputs:
            _widen(need, key_of(atom), [_whole(_shape(atom))])
    plans: dict[int, KernelPlan] = {}
    for step in reversed(flat.steps):
        if step.eqn.primitive.name != "pallas_call":
            _pull_back(step, need)
            continue
        eqn, operands = step.eqn, index_values[id(step)]
        mapping = eqn.params["grid_mapping"]
        terminal = any(key in free for key in step.outs)
        required = _required_blocks(eqn, operands, [need.get(k, []) for k in step.outs])
        control, sample = choose_blocks(
            eqn, operands, rng, random_blocks if terminal else 0, required
        )
        output_axes = control.output_axes
        total = math.prod(mapping.grid[a] for a in output_axes)
        steps = len(sample) * math.prod(
            g for a, g in enumerate(mapping.grid) if a not in output_axes
        )
        few_steps = max_steps is not None and steps <= max_steps
        if whole and not few_steps:
            raise _TooWide(f"{kernel_name(eqn)} would run {steps} grid steps")
        too_many = len(sample) > MAX_PULLED_BLOCKS and not few_steps
        if required is not None and too_many and not terminal:
            budget = f"more than {MAX_PULLED_BLOCKS} to run" + (
                f" (and more than {max_steps} grid steps: {steps})" if max_steps else ""
            )
            if len(sample) == total:  # 13p: a scalar of every row's loss
                raise _TooWide(
                    f"every one of {kernel_name(eqn)}'s {total} output blocks is read by the "
                    "later kernels' sampled blocks (what the sample decides depends on all of it), "
                    + budget
                )
            raise _TooWide(
                f"{kernel_name(eqn)}'s output blocks that the later kernels' sampled blocks "
                f"read are {len(sample)} of {total}, {budget}"
            )
        ins = step.ins[mapping.num_index_operands :]
        opaque = frozenset(
            i for i, atom in enumerate(ins) if key_of(atom) in derived and not _is_float(atom)
        )
        plans[id(step)] = KernelPlan(output_axes, sample, opaque)
        reads = _reads(eqn, operands, _points(mapping, output_axes, sample))
        for atom, spans_read in zip(ins, reads, strict=True):
            _widen(need, key_of(atom), _unique(spans_read))
        for atom in step.ins[: mapping.num_index_operands]:
            _widen(need, key_of(atom), [_whole(_shape(atom))])
    return plans


def kernels_alive(closed_jaxpr: Any) -> list[tuple[Any, int]]:
    """Each pallas_call the program runs, with the bytes of the values computed in the program
    (not its inputs or constants) alive while it runs, besides its own outputs: each value
    lives from the step computing it to its last use, the program's outputs to the end."""
    flat = _flattened(closed_jaxpr)
    last: dict[Any, int] = {}
    for position, step in enumerate(flat.steps):
        last.update((k, position) for k in map(key_of, step.ins) if k is not None)
    last.update((k, len(flat.steps)) for k in map(key_of, flat.outputs) if k is not None)
    born: list[tuple[int, int, int]] = [
        (position, last.get(key, position), _bytes(key))
        for position, step in enumerate(flat.steps)
        for key in step.outs
    ]
    return [
        (
            step.eqn,
            sum(n for start, end, n in born if start < position <= end),
        )
        for position, step in enumerate(flat.steps)
        if step.eqn.primitive.name == "pallas_call"
    ]


def _bytes(key: Key) -> int:
    aval = key[1].aval
    shape = getattr(aval, "shape", None)
    return 0 if shape is None else math.prod(shape) * np.dtype(aval.dtype).itemsize


def decided_regions(
    eqn: Any, args: list[Any], kernel: KernelPlan, regions: list[list[Region]]
) -> list[list[Region]]:
    """The regions of each output the sampled blocks decide in a provenance run (`args`: the
    operands with every undecided element NaN): a block is decided where every region it reads
    is; `regions` are those all sampled blocks write."""
    mapping = eqn.params["grid_mapping"]
    operands = [np.asarray(a) for a in args[: mapping.num_index_operands]]
    inputs = args[mapping.num_index_operands :]
    points = _points(mapping, kernel.output_axes, kernel.sample)
    steps = len(points) // len(kernel.sample)
    per_block = [[True] * len(kernel.sample) for _ in inputs]
    for i, (value, reads) in enumerate(zip(inputs, _reads(eqn, operands, points), strict=True)):
        if i in kernel.opaque:
            per_block[i] = [False] * len(kernel.sample)
            continue
        if not jnp.issubdtype(value.dtype, jnp.floating):
            continue
        array = np.asarray(value)  # only the boxes read are looked at: inputs can be GiBs
        undecided: dict[Box, bool] = {}  # a box read by several blocks is looked at once
        for block in range(len(kernel.sample)):
            rows = reads[block * steps : (block + 1) * steps]
            per_block[i][block] = not any(
                undecided.setdefault(
                    box, bool(np.isnan(array[tuple(slice(a, b) for a, b in box)]).any())
                )
                for box in _unique(rows)
            )
    decided = _along_chains(
        [all(flags[block] for flags in per_block) for block in range(len(kernel.sample))],
        kernel.chains,
    )
    if all(decided):
        return regions
    outputs = mapping.block_mappings[mapping.num_inputs :]
    found: list[list[Region]] = []
    for block, value in zip(outputs, eqn.outvars, strict=True):
        indices = block_indices(block, points, operands)
        shape = tuple(value.aval.shape)
        written = [
            spans(block, indices[b * steps : (b + 1) * steps], shape)
            for b in range(len(kernel.sample))
        ]
        kept = [row for b, rows in enumerate(written) if decided[b] for row in rows]
        # an output block an undecided block writes too (an accumulator revisited along the
        # grid, as a norm's dscale) holds what that block added: undecided
        lost = [row for b, rows in enumerate(written) if not decided[b] for row in rows]
        found.append(
            sorted(
                {
                    tuple((int(a), int(b - a)) for a, b in row)
                    for row in kept
                    if (row[:, 1] > row[:, 0]).all() and not any(_meets(row, o) for o in lost)
                }
            )
        )
    return found


def _along_chains(decided: list[bool], chains: np.ndarray) -> list[bool]:
    """A block after an undecided one in its chain is undecided: state it carried (scratch,
    a resident output) holds what the undecided block read."""
    if not len(chains):
        return decided
    tainted: set[int] = set()
    found = []
    for flag, chain in zip(decided, chains.tolist(), strict=True):
        if not flag:
            tainted.add(chain)
        found.append(flag and chain not in tainted)
    return found


def _meets(row: np.ndarray, other: np.ndarray) -> bool:
    """Whether two [start, stop) boxes (per dimension) share an element."""
    return bool((np.maximum(row[:, 0], other[:, 0]) < np.minimum(row[:, 1], other[:, 1])).all())


def _points(mapping: Any, output_axes: tuple[int, ...], sample: np.ndarray) -> np.ndarray:
    """The production grid points of the sampled blocks, block by block (every reduction step
    of each)."""
    grid = tuple(mapping.grid)
    rest = tuple(a for a in range(len(grid)) if a not in output_axes)
    return ToProduction(grid, output_axes, rest, sample).points()


def _reads(eqn: Any, operands: list[np.ndarray], points: np.ndarray) -> list[np.ndarray]:
    """Per input, the [start, stop) it reads at each grid point (`spans`' layout): the whole
    input for one in memory space ANY (read by DMA anywhere) or with blocks not followed here."""
    mapping = eqn.params["grid_mapping"]
    found = []
    for block, var in zip(
        mapping.block_mappings[: mapping.num_inputs],
        eqn.invars[mapping.num_index_operands :],
        strict=True,
    ):
        shape = tuple(var.aval.shape)
        kinds = [dim_kind(d) for d in block.block_shape]
        padded = any(getattr(d, "padding", (0, 0)) != (0, 0) for d in block.block_shape)
        if in_any_space(block) or None in kinds or padded:
            whole = np.array(_whole(shape), np.int64).reshape(len(shape), 2)
            found.append(np.broadcast_to(whole, (len(points), len(shape), 2)))
        else:
            found.append(spans(block, block_indices(block, points, operands), shape))
    return found


def _unique(rows: np.ndarray) -> list[Box]:
    """The distinct non-empty boxes among `spans` rows."""
    if not len(rows):
        return []
    flat = np.unique(rows.reshape(len(rows), -1), axis=0).reshape(-1, *rows.shape[1:])
    return [
        tuple((int(a), int(b)) for a, b in row) for row in flat if (row[:, 1] > row[:, 0]).all()
    ]


def _is_float(atom: Any) -> bool:
    aval = atom[1].aval if isinstance(atom, tuple) else atom.aval
    return bool(jnp.issubdtype(aval.dtype, jnp.floating))


def _shape(atom: Any) -> tuple[int, ...]:
    return tuple(getattr(atom[1].aval if isinstance(atom, tuple) else atom.aval, "shape", ()))


def _whole(shape: tuple[int, ...]) -> Box:
    return tuple((0, n) for n in shape)


def _flattened(closed_jaxpr: Any) -> FlatProgram:
    try:
        return flatten(closed_jaxpr)
    except NotFlat as refused:
        raise NotSampleable(str(refused)) from None


def _mixed_outputs(flat: FlatProgram) -> bool:
    """Whether one element of each program output is made, by the XLA after the kernels, from
    the whole of some kernel's output of more than one element."""
    need: dict[Key, list[Box]] = {}
    for atom in flat.outputs:
        _widen(need, key_of(atom), [tuple((0, 1) for _ in _shape(atom))])
    for step in reversed(flat.steps):
        if step.eqn.primitive.name != "pallas_call":
            _pull_back(step, need)
    return any(
        need.get(key) == [_whole(_shape(key))] and math.prod(_shape(key)) > 1
        for step in flat.steps
        if step.eqn.primitive.name == "pallas_call"
        for key in step.outs
    )


def _reach_outputs(flat: FlatProgram) -> set[Any]:
    """The values the program's outputs depend on through XLA alone (no kernel between)."""
    free = {k for k in map(key_of, flat.outputs) if k is not None}
    for step in reversed(flat.steps):
        if step.eqn.primitive.name != "pallas_call" and free.intersection(step.outs):
            free.update(k for k in map(key_of, step.ins) if k is not None)
    return free


def _derived(flat: FlatProgram) -> set[Any]:
    """The values computed from some kernel's outputs."""
    derived: set[Any] = set()
    for step in flat.steps:
        ins = {k for k in map(key_of, step.ins) if k is not None}
        if step.eqn.primitive.name == "pallas_call" or derived.intersection(ins):
            derived.update(step.outs)
    return derived


def _widen(need: dict[Key, list[Box]], key: Key | None, found: list[Box]) -> None:
    """Add `found` to the boxes a value is needed on; past MAX_BOXES, the box holding them."""
    if key is None or not found:
        return
    held = list(dict.fromkeys([*need.get(key, []), *found]))
    if len(held) > MAX_BOXES:
        held = [
            tuple(
                (min(r[d][0] for r in held), max(r[d][1] for r in held))
                for d in range(len(held[0]))
            )
        ]
    need[key] = held


def _pull_back(step: Step, need: dict[Key, list[Box]]) -> None:
    """The boxes of an XLA operation's operands that the boxes needed of its results read."""
    demanded = [need.get(k, []) for k in step.outs]
    if not any(demanded):
        return
    shapes = [_shape(a) for a in step.ins]
    found: list[list[Box]] = [[] for _ in step.ins]
    try:
        if len(step.outs) != 1:
            raise _Whole(f"{step.eqn.primitive.name} with several results")
        for box in demanded[0]:
            for i, region in enumerate(_operand_boxes(step.eqn, shapes, box)):
                if region is not None:
                    found[i].extend(region)
    except _Whole:
        found = [[_whole(shape)] for shape in shapes]
    for atom, boxes_found in zip(step.ins, found, strict=True):
        _widen(need, key_of(atom), boxes_found)


def _operand_boxes(eqn: Any, shapes: list[tuple[int, ...]], box: Box) -> list[list[Box] | None]:
    """Per operand, the boxes one result box reads (None: none of it)."""
    name, params = eqn.primitive.name, eqn.params
    if name == "reshape":
        if params.get("dimensions") is not None or len(shapes) != 1:
            raise _Whole("a reshape with dimensions")
        return [_reshaped(box, tuple(eqn.outvars[0].aval.shape), shapes[0])]
    if name == "slice":
        strides = params["strides"] or (1,) * len(box)
        return [
            [
                tuple(
                    (start + a * stride, start + (b - 1) * stride + 1)
                    for (a, b), start, stride in zip(
                        box, params["start_indices"], strides, strict=True
                    )
                )
            ]
        ]
    if name == "concatenate":
        dim, offset, found = params["dimension"], 0, []
        for shape in shapes:
            a, b = max(box[dim][0] - offset, 0), min(box[dim][1] - offset, shape[dim])
            found.append([(*box[:dim], (a, b), *box[dim + 1 :])] if a < b else None)
            offset += shape[dim]
        return found
    if name == "pad":
        config = params["padding_config"]
        if any(interior for _, _, interior in config):
            raise _Whole("an interior pad")
        region = tuple(
            (min(max(a - low, 0), n), min(max(b - low, 0), n))
            for (a, b), (low, _, _), n in zip(box, config, shapes[0], strict=True)
        )
        return [[region] if all(a < b for a, b in region) else None, [()]]
    if name == "rev":
        flipped = set(params["dimensions"])
        return [
            [
                tuple(
                    (n - b, n - a) if d in flipped else (a, b)
                    for d, ((a, b), n) in enumerate(zip(box, shapes[0], strict=True))
                )
            ]
        ]
    return [None if r is None else [r] for r in _followed_regions(eqn, shapes, box)]


def _followed_regions(eqn: Any, shapes: list[tuple[int, ...]], box: Box) -> list[Box | None]:
    """Operations whose result box reads operand boxes by dimension. A wrong guess here costs
    coverage only: the provenance run still finds every element a missing block feeds."""
    name, params = eqn.primitive.name, eqn.params
    out_shape = tuple(eqn.outvars[0].aval.shape)
    if name == "iota":
        return []
    if name == "broadcast_in_dim" and len(shapes) == 1:
        dims = params["broadcast_dimensions"]
        return [tuple((0, 1) if n == 1 else box[dims[d]] for d, n in enumerate(shapes[0]))]
    if name == "transpose":
        region: list[tuple[int, int]] = [(0, 0)] * len(box)
        for position, dim in enumerate(params["permutation"]):
            region[dim] = box[position]
        return [tuple(region)]
    if name in AXIS_REDUCTIONS:
        axes, kept = set(params["axes"]), iter(box)
        return [tuple((0, n) if d in axes else next(kept) for d, n in enumerate(shapes[0]))]
    if name == "squeeze":
        squeezed, kept = set(params["dimensions"]), iter(box)
        return [tuple((0, 1) if d in squeezed else next(kept) for d in range(len(shapes[0])))]
    if name == "dot_general":
        return dot_regions(params["dimension_numbers"], shapes, box)
    if name not in CUMULATIVE_REDUCTIONS and all(
        not shape or shape == out_shape for shape in shapes
    ):  # elementwise
        return [box if shape else () for shape in shapes]
    raise _Whole(name)


def _reshaped(box: Box, shape: tuple[int, ...], operand: tuple[int, ...]) -> list[Box]:
    """The operand box holding the elements of a reshape's result box (the same elements in
    row-major order): the box holding its first and last."""
    if any(b <= a for a, b in box):
        return []
    strides = np.cumprod([1, *shape[::-1]])[-2::-1]
    first = np.unravel_index(sum(a * int(s) for (a, _), s in zip(box, strides)), operand)
    last = np.unravel_index(sum((b - 1) * int(s) for (_, b), s in zip(box, strides)), operand)
    region: list[tuple[int, int]] = []
    for d, n in enumerate(operand):
        if any(b - a > 1 for a, b in region):
            region.append((0, n))
        else:
            region.append((int(first[d]), int(last[d]) + 1))
    return [tuple(region)]


def _required_blocks(
    eqn: Any, operands: list[np.ndarray], needed: list[list[Box]]
) -> np.ndarray | None:
    """The output blocks (rows of output-axis ids) meeting the boxes needed of the outputs;
    None when no later kernel reads them."""
    if not any(needed):
        return None
    mapping = eqn.params["grid_mapping"]
    grid = tuple(mapping.grid)
    outputs = mapping.block_mappings[mapping.num_inputs :]
    output_axes = classes.evaluate(eqn, operands, kernel_name(eqn)).output_axes
    # one row per output block; a kernel with one output block (no output axes) has one row
    # of no ids, which reshape(-1, 0) cannot infer
    every = np.array(
        list(itertools.product(*(range(grid[a]) for a in output_axes))), np.int64
    ).reshape(math.prod(grid[a] for a in output_axes), len(output_axes))
    points = np.zeros((len(every), len(grid)), np.int32)
    points[:, list(output_axes)] = every
    meets = np.zeros(len(every), bool)
    for block, var, wanted in zip(outputs, eqn.outvars, needed, strict=True):
        if not wanted:
            continue
        covered = spans(block, block_indices(block, points, operands), tuple(var.aval.shape))
        for box in wanted:
            low = np.array([a for a, _ in box], np.int64)
            high = np.array([b for _, b in box], np.int64)
            meets |= ((covered[:, :, 0] < high) & (covered[:, :, 1] > low)).all(axis=1)
    return every[meets]
