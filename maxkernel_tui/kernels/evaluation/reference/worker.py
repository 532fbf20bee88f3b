"""The process that computes reference outputs, apart from any candidate. Imports jax.

    python -m maxkernel_tui.kernels.evaluation.reference.worker

Long-lived: one JSON request per line (a `ReferenceRequest`), one JSON answer per line (a
`ReferenceAnswer`; evaluation/protocol.py). Matmuls run at the highest
precision jax offers on the device; every other step keeps the reference's own dtypes, since
they are part of the task's semantics. For the production tiles check it makes the production
inputs, and computes the reference's outputs at the indices a candidate's sample decides: over
the boxes holding them where the reference's operations allow (reference_slices.py) and the
boxes' cost fits the budgets, else whole.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation import gradients
from maxkernel_tui.kernels.evaluation.judge.outputs import save_outputs
from maxkernel_tui.kernels.evaluation.protocol import (
    NumericsRun,
    ProductionRequest,
    ReferenceAnswer,
    ReferenceRequest,
)
from maxkernel_tui.kernels.evaluation.reference import slices as reference_slices
from maxkernel_tui.kernels.evaluation.tiles import memory as tiles_memory
from maxkernel_tui.kernels.evaluation.work.jaxpr_work import measure, value_bytes
from maxkernel_tui.kernels.evaluation.work.production_checks import REFERENCE_FLOPS_BUDGET
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.perf.jaxpr_walk import walk
from maxkernel_tui.kernels.task import Task, TaskError
from maxkernel_tui.kernels.worker_reply import reply
from maxkernel_tui.kernels.workers import READY

# The most boxes the reference is computed over (a sample is a few blocks per kernel; indices
# scattered over more boxes than this are computed from the whole reference).
MAX_BOXES = 256
# Boxes of one output tried in pairs for merging (_merged); past this, each kept apart
MAX_MERGED = 32


def reference_outputs(request: ReferenceRequest) -> ReferenceAnswer:
    try:
        task = load_task(request.task).with_gradients(tuple(request.gradients))
        module = runtime.load_reference(task)
        task = runtime.with_extra_configs(task, module, request.extra_configs)
    except TaskError as error:
        return ReferenceAnswer(error=str(error))
    runs = []
    for config, seed in request.runs:
        try:
            with jax.default_matmul_precision("highest"):
                dynamic, static, output = runtime.run_reference(task, module, config, seed)
            out_dir = Path(request.out_dir)
            files = save_outputs(out_dir, f"reference-{config}-{seed}", output)
            grads = _gradients(task, module, dynamic, static, seed)
            saved = save_outputs(out_dir, f"reference-grad-{config}-{seed}", grads)
            runs.append(NumericsRun(config, seed, files=files, gradient_files=saved or None))
        except TaskError as error:
            runs.append(NumericsRun(config, seed, error=str(error)))
    if request.production is not None:
        runs.append(_production(task, module, request.production, Path(request.out_dir)))
    return ReferenceAnswer(runs)


def _gradients(
    task: Task, module: Any, dynamic: tuple[Any, ...], static: tuple[Any, ...], seed: int
) -> list[Any]:
    """The reference's gradients of the task's requested parameters (jax.vjp, the seed's
    cotangents: evaluation/gradients.py); none where the task asks for none."""
    if not task.gradients:
        return []
    at = gradients.positions(task, len(dynamic))
    try:
        return gradients.reference_gradients(module.computation, dynamic, static, at, seed)
    except Exception as error:
        raise TaskError(task.reference_path, f"jax.vjp of computation fails: {error}") from None


def _production(task: Task, module: Any, asked: ProductionRequest, out_dir: Path) -> NumericsRun:
    """The production tiles' inputs, saved; or, given them and the sample's indices, the
    reference's outputs there: by regions where the reference allows (reference_slices.py) and
    they fit the CPU budget (production_checks.REFERENCE_FLOPS_BUDGET) and the memory there is,
    else whole within them."""
    run = functools.partial(NumericsRun, asked.config, asked.seed)
    started = time.perf_counter()
    try:
        specs, static = runtime.input_specs(task, module, asked.config)
        traced = jax.make_jaxpr(lambda *d: module.computation(*d, *static))(*specs)
        if asked.gradients:  # a backward's sample: the reference's gradients there
            with_gradients = task.with_gradients(tuple(asked.gradients))
            at = gradients.positions(with_gradients, len(specs))
            outputs = traced.out_avals
            backward, flat = gradients.flat_backward(module.computation, specs, static, at, outputs)
            traced = jax.make_jaxpr(backward)(*flat)
    except Exception as error:
        return run(error=f"the reference does not trace: {error}")
    if not asked.inputs:
        return _saved_inputs(task, module, asked, out_dir)
    leaves = jax.tree.leaves(specs)
    inputs = [
        np.load(path, mmap_mode="r", allow_pickle=False).view(spec.dtype).reshape(spec.shape)
        for path, spec in zip(asked.inputs, leaves, strict=True)
    ]
    if asked.gradients:  # the cotangents the candidate's sample was fed
        inputs += [np.asarray(c) for c in gradients.cotangents(outputs, asked.seed)]
    flops = measure(traced).xla_flops
    with jax.default_matmul_precision("highest"):
        by_regions = _by_regions(traced, inputs, asked.indices, flops)
    if not isinstance(by_regions, str):
        files = [
            _save(out_dir / f"expected-{number}.npy", array)
            for number, array in enumerate(by_regions)
        ]
        return run(files=files, at_indices=True, seconds=time.perf_counter() - started)
    if flops > REFERENCE_FLOPS_BUDGET:
        return run(
            error=f"the reference at production shapes needs {flops:.3g} matmul flops, over "
            f"the CPU budget of {REFERENCE_FLOPS_BUDGET:.0g} (a TPU runs them in full); "
            f"{by_regions}",
        )
    if (too_big := _memory_problem(traced, sum(a.nbytes for a in inputs))) is not None:
        return run(error=f"{too_big}; {by_regions}")
    try:
        with jax.default_matmul_precision("highest"):
            output = jax.core.eval_jaxpr(traced.jaxpr, traced.consts, *inputs)
    except Exception as error:
        return run(error=f"the reference failed at production shapes: {error}")
    files = save_outputs(out_dir, f"reference-{asked.config}-{asked.seed}", output)
    return run(files=files, at_indices=False, seconds=time.perf_counter() - started)


def _memory_problem(
    traced: Any, inputs_bytes: int, where: str = "at production shapes"
) -> str | None:
    """Why the reference (whole at production shapes, or one box) cannot be computed in the
    memory there is, or None. Unchecked, attention's score matrix (17 GiB for 1p) had the
    machine's OOM killer end this process, and could have picked another one."""
    size, name = _largest_value(traced.jaxpr)
    need = inputs_bytes + 2 * size  # the largest value and what it is made from
    room = tiles_memory.memory_room()
    if room is None or need <= room:
        return None
    return (
        f"the reference {where} needs about {tiles_memory.gib(need)} ({name}), "
        f"more than the {tiles_memory.gib(room)} available"
    )


def _largest_value(jaxpr: Any) -> tuple[int, str]:
    """The bytes of the largest set of values one equation makes, anywhere in the program, and
    the equation (primitive and result types)."""
    largest, name = 0, "no equation"
    for site in walk(jaxpr):
        outvars: list[Any] = site.eqn.outvars  # their avals' shapes and dtypes are read untyped
        size = value_bytes(outvars)
        if size > largest:
            types = ", ".join(f"{v.aval.dtype}{list(v.aval.shape)}" for v in outvars)
            largest, name = size, f"`{site.name}` makes {types}"
    return largest, name


def _by_regions(
    traced: Any, inputs: list[np.ndarray], index_files: list[str], whole_flops: float
) -> list[np.ndarray] | str:
    """Each output at the sample's flat indices, computed over the boxes holding them
    (reference_slices.boxes); or why not: an operation the regions do not follow, indices
    scattered over too many boxes, boxes whose matmul flops together are no fewer than the whole
    reference's `whole_flops` (each box of a scalar or a global statistic needs all of it; the
    whole is computed once and kept) or over the budget, or a box whose largest value does not
    fit."""
    wanted = []
    try:
        for number, (path, aval) in enumerate(zip(index_files, traced.out_avals, strict=True)):
            indices = np.load(path, allow_pickle=False)
            shape = tuple(aval.shape)
            found = reference_slices.boxes(indices, shape)
            if len(found) > MAX_BOXES:  # scattered indices: the whole reference costs less
                return f"the sample's indices fall in {len(found)} boxes"
            wanted.append((indices, shape, _merged(traced, number, found)))
    except reference_slices.NotSliceable as why:
        return f"not by regions: {why}"
    programs = [program for _, _, boxes in wanted for _, program, _ in boxes]
    flops = sum(box_flops for _, _, boxes in wanted for _, _, box_flops in boxes)
    if flops > REFERENCE_FLOPS_BUDGET or 0 < whole_flops <= flops:
        return f"by the sample's regions it needs {flops:.3g} matmul flops"
    for program in programs:
        read = sum(
            math.prod(b - a for a, b in region) * array.dtype.itemsize
            for array, region in zip(inputs, program.regions, strict=True)
            if region is not None
        )
        if (too_big := _memory_problem(program.traced, read, "on a box")) is not None:
            return too_big
    return [
        _at_indices([(box, program) for box, program, _ in boxes], inputs, indices, shape)
        for indices, shape, boxes in wanted
    ]


def _merged(
    traced: Any, output: int, found: list[reference_slices.Region]
) -> list[tuple[reference_slices.Region, reference_slices.BoxProgram, float]]:
    """The boxes' programs (and matmul flops), two boxes alike but along one dimension merged
    into the box holding both where that costs fewer flops: 9p's sampled blocks of one row of
    the output each recompute the same hidden rows, once merged."""
    boxes = [_box(traced, output, box) for box in found]
    merging = len(boxes) <= MAX_MERGED
    while merging:
        merging = False
        for (i, first), (j, second) in itertools.combinations(enumerate(boxes), 2):
            differ = [d for d, (a, b) in enumerate(zip(first[0], second[0])) if a != b]
            if len(differ) != 1:
                continue
            holding = tuple((min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(first[0], second[0]))
            merged = _box(traced, output, holding)
            if merged[2] < first[2] + second[2]:
                boxes = [box for k, box in enumerate(boxes) if k not in (i, j)] + [merged]
                merging = True
                break
    return boxes


def _box(
    traced: Any, output: int, box: reference_slices.Region
) -> tuple[reference_slices.Region, reference_slices.BoxProgram, float]:
    program = reference_slices.box_program(traced, output, box)
    return box, program, measure(program.traced).xla_flops


def _at_indices(
    boxes: list[tuple[reference_slices.Region, reference_slices.BoxProgram]],
    inputs: list[np.ndarray],
    indices: np.ndarray,
    shape: tuple[int, ...],
) -> np.ndarray:
    """One output at its flat `indices`, from the programs of the boxes holding them: each box's
    elements searched among the indices (not every index tested against every box)."""
    if not (indices[1:] > indices[:-1]).all():  # not sorted as flatnonzero gives them
        distinct, inverse = np.unique(indices, return_inverse=True)
        return _at_indices(boxes, inputs, distinct, shape)[inverse.reshape(-1)]
    found = np.full(indices.shape, np.nan, np.float32)
    strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    for box, program in boxes:
        value = np.asarray(program.run(inputs), np.float32).reshape(-1)
        flat = np.zeros((1,) * len(box), np.int64)  # the box's flat indices, row-major
        for d, ((a, b), stride) in enumerate(zip(box, strides, strict=True)):
            along = [-1 if e == d else 1 for e in range(len(box))]
            flat = flat + (np.arange(a, b, dtype=np.int64) * stride).reshape(along)
        flat = flat.reshape(-1)
        at = np.minimum(np.searchsorted(indices, flat), len(indices) - 1)
        held = indices[at] == flat
        found[at[held]] = value[held]
    return found


def _save(path: Path, array: np.ndarray) -> str:
    np.save(path, array, allow_pickle=False)
    return str(path)


def _saved_inputs(task: Task, module: Any, asked: ProductionRequest, out_dir: Path) -> NumericsRun:
    """The production inputs from the task's get_inputs and the seed, saved as raw bytes (the
    reader views them as the input's dtype: bf16 has no .npy type)."""
    try:
        dynamic, _ = runtime.make_inputs(task, module, asked.config, asked.seed)
    except TaskError as error:
        return NumericsRun(asked.config, asked.seed, error=str(error))
    inputs = []
    for index, leaf in enumerate(jax.tree.leaves(dynamic)):
        array = np.asarray(leaf)
        path = out_dir / f"input-{asked.config}-{asked.seed}-{index}.npy"
        np.save(path, array.view(f"V{array.dtype.itemsize}"))
        inputs.append(str(path))
    return NumericsRun(asked.config, asked.seed, files=[], inputs=inputs)


def main() -> None:
    reply(READY)
    for line in sys.stdin:
        if line.strip():
            answer = reference_outputs(ReferenceRequest.from_json(json.loads(line)))
            reply(answer.to_json())


if __name__ == "__main__":
    main()
