"""The production tiles check's side of the reference process, for the harness: the production
inputs (made once per task and seed by the sandboxed reference worker, kept in the cache, read in
place by candidates) and the reference's outputs at the indices a candidate's sample decides
(computed there by regions, evaluation/reference/slices.py, and kept for the last few samples;
or whole and then kept). No jax.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from maxkernel_tui.kernels.evaluation.protocol import (
    NumericsRun,
    ProductionRequest,
    ReferenceAnswer,
    ReferenceRequest,
    TilesRequest,
    TilesRun,
)
from maxkernel_tui.kernels.evaluation.reference import cache as reference_cache
from maxkernel_tui.kernels.evaluation.tiles.verdict import expected_values
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.kernels.workers import LineWorker


class TilesReference:
    """Asks a task's reference worker (`worker_for`, through `ask`, under `lock`; it writes only
    beneath its own directory) for what the tiles check needs, and keeps it in the cache."""

    def __init__(
        self,
        worker_for: Callable[[Task], LineWorker],
        ask: Callable[[LineWorker, ReferenceRequest], ReferenceAnswer],
        lock: threading.Lock,
    ) -> None:
        self._worker_for, self._ask, self._lock = worker_for, ask, lock

    def inputs(self, task: Task, tiles: TilesRequest) -> tuple[TilesRequest | None, str]:
        """The tiles request with the production inputs the candidate reads in place: from the
        cache, made on first use by the sandboxed reference worker and kept there; or None and
        why they could not be made."""
        run = (task.configs[0], tiles.input_seed)
        entry = reference_cache.inputs_folder(task, *run)
        inputs = reference_cache.cached(entry, "input")
        if inputs is None:
            with self._scratch(task) as scratch:
                made = self._ask_production(task, ProductionRequest(*run), scratch)
                if made.error is not None or not made.inputs:
                    return None, made.error or "the reference worker made no inputs"
                inputs = reference_cache.keep(entry, "input", made.inputs)
        return replace(tiles, inputs=inputs), ""

    def expected(self, task: Task, run: TilesRun) -> list[Any] | str | None:
        """The reference's outputs at the candidate's sampled indices: from whole outputs kept in
        the cache, or from the same sample's values kept there, else computed by the reference
        worker at those indices (by regions, then kept), or whole
        where the reference cannot be cut into regions (then kept); None when the candidate's run
        has nothing to compare, a string when the reference failed."""
        if run.error is not None or run.values is None or run.indices is None:
            return None
        key = (run.config, run.input_seed)
        # a backward's reference (the gradients) is kept apart from the outputs' in the cache
        kept_as = (f"{run.config}|vjp:{','.join(run.gradients)}", run.input_seed)
        if not run.gradients:
            kept_as = key
        whole_entry = reference_cache.folder(task, *kept_as)
        whole = reference_cache.cached(whole_entry, "reference")
        try:
            if whole is None:
                at_entry = reference_cache.at_indices_folder(task, *kept_as, run.indices)
                kept = reference_cache.cached(at_entry, "expected")
                if kept is not None:
                    return expected_values(NumericsRun(*key, kept, at_indices=True), run.indices)
                inputs = reference_cache.cached(reference_cache.inputs_folder(task, *key), "input")
                if inputs is None:
                    return "the production inputs left the cache"
                with self._scratch(task) as scratch:
                    # the sample's indices, where the reference worker may read them
                    indices = [str(shutil.copy(path, scratch)) for path in run.indices]
                    asked = ProductionRequest(
                        *key, inputs=inputs, indices=indices, gradients=run.gradients
                    )
                    made = self._ask_production(task, asked, scratch)
                    if made.error is not None or made.files is None:
                        return made.error or "no answer"
                    if made.at_indices:
                        kept = reference_cache.keep(at_entry, "expected", made.files)
                        reference_cache.prune_samples(at_entry)
                        kept_run = NumericsRun(*key, kept, at_indices=True)
                        return expected_values(kept_run, run.indices)
                    whole = reference_cache.keep(whole_entry, "reference", made.files)
            return expected_values(NumericsRun(*key, files=whole), run.indices)
        except (OSError, ValueError) as error:
            return f"the reference's production outputs could not be read: {error}"

    @contextlib.contextmanager
    def _scratch(self, task: Task) -> Iterator[Path]:
        """A directory of the task's reference worker (it may write nothing else), removed
        after; the reference lock is held throughout, so the worker stays started."""
        with self._lock:
            directory = self._worker_for(task).directory
            assert directory is not None
            scratch = Path(tempfile.mkdtemp(dir=directory))
            try:
                yield scratch
            finally:
                shutil.rmtree(scratch, ignore_errors=True)

    def _ask_production(self, task: Task, asked: ProductionRequest, scratch: Path) -> NumericsRun:
        """The answer of the task's reference worker; called inside `_scratch`."""
        request = ReferenceRequest(str(task.folder), [], str(scratch), production=asked)
        answer = self._ask(self._worker_for(task), request)
        return next(iter(answer.runs), NumericsRun(asked.config, asked.seed, error=answer.error))
