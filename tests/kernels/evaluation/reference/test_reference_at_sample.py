"""The reference's values at a sample's indices are kept in the cache: the same sample (the same
kernel evaluated again) reads them instead of asking the reference worker to recompute its
blocks, another sample asks again, and only the last few samples of a task are kept. A fake
reference worker; no jax."""

import threading
from pathlib import Path

import numpy as np

from maxkernel_tui.kernels.evaluation.protocol import (
    NumericsRun,
    ReferenceAnswer,
    ReferenceRequest,
    TilesRun,
)
from maxkernel_tui.kernels.evaluation.reference import cache as reference_cache
from maxkernel_tui.kernels.evaluation.reference.tiles import TilesReference
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task


class _Worker:
    def __init__(self, directory: Path) -> None:
        self.directory = directory


def _reference(tmp_path, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(tmp_path / "cache"))
    task = load_task(next(builtin_suite_dir().glob("12p_*")))
    made = tmp_path / "input-0.npy"
    np.save(made, np.zeros(4, np.float32))
    reference_cache.keep(reference_cache.inputs_folder(task, "bench", 0), "input", [str(made)])
    worker = _Worker(tmp_path / "worker")
    worker.directory.mkdir()
    asked: list[ReferenceRequest] = []

    def ask(_worker, request: ReferenceRequest) -> ReferenceAnswer:
        asked.append(request)
        assert request.production is not None
        (indices,) = request.production.indices
        values = Path(request.out_dir) / "at-0.npy"
        np.save(values, np.load(indices).astype(np.float32) * 2)
        run = NumericsRun("bench", 0, files=[str(values)], at_indices=True)
        return ReferenceAnswer([run])

    return task, TilesReference(lambda _task: worker, ask, threading.Lock()), asked


def _run(tmp_path, indices: np.ndarray, name: str) -> TilesRun:
    path = tmp_path / f"{name}.npy"
    np.save(path, indices)
    return TilesRun("bench", 0, 7, values=[str(path)], indices=[str(path)])


def test_the_same_sample_reads_the_kept_values_and_another_asks_again(tmp_path, monkeypatch):
    task, tiles, asked = _reference(tmp_path, monkeypatch)
    first = _run(tmp_path, np.array([1, 5, 9]), "first")
    (found,) = tiles.expected(task, first)
    np.testing.assert_array_equal(found, [2, 10, 18])
    # the same indices in another file (the next evaluation of the same kernel): not asked
    (again,) = tiles.expected(task, _run(tmp_path, np.array([1, 5, 9]), "again"))
    np.testing.assert_array_equal(again, found)
    assert len(asked) == 1
    (other,) = tiles.expected(task, _run(tmp_path, np.array([1, 5, 10]), "other"))
    np.testing.assert_array_equal(other, [2, 10, 20])
    assert len(asked) == 2


def test_only_the_last_samples_of_a_task_are_kept(tmp_path, monkeypatch):
    task, tiles, asked = _reference(tmp_path, monkeypatch)
    samples = reference_cache.KEPT_SAMPLES + 3
    for n in range(samples):
        tiles.expected(task, _run(tmp_path, np.array([n, n + 1]), f"s{n}"))
    root = tmp_path / "cache" / "production-reference-at"
    assert len([p for p in root.iterdir() if p.is_dir()]) == reference_cache.KEPT_SAMPLES
    # the latest is among them, the first is not
    tiles.expected(task, _run(tmp_path, np.array([samples - 1, samples]), "latest"))
    assert len(asked) == samples
    tiles.expected(task, _run(tmp_path, np.array([0, 1]), "earliest"))
    assert len(asked) == samples + 1
