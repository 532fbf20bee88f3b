"""The reference's production outputs, and the inputs they were computed on, kept in the user's
cache: computed once per task and seed (for the production tiles check), read back by the
harness. No jax: the reference worker computes them in its own sandboxed directory and the
harness, which alone may write the cache, keeps them here.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels.evaluation.protocol import NumericsRun, Run
from maxkernel_tui.kernels.task import Task

_COMPLETE = "complete"  # written last: a folder without it is an interrupted entry


def folder(task: Task, config: str, seed: int) -> Path:
    """Where one (task, configuration, seed) is kept: named by the task's files and the jax
    that computes it, so an edited task or another jax computes it again."""
    from maxkernel_tui.versions import installed_version  # importlib.metadata: not at start-up

    digest = hashlib.sha256(f"{installed_version('jax')}|{config}|{seed}".encode())
    for path in task.defining_files:
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    safe_id = re.sub(r"[^A-Za-z0-9_.-]", "_", task.task_id)
    return cache_dir() / "production-reference" / f"{safe_id}-{digest.hexdigest()[:20]}"


def cached(entry: Path, run: Run) -> NumericsRun | None:
    if not (entry / _COMPLETE).exists():
        return None
    return NumericsRun(*run, files=_numbered(entry, "reference"), inputs=_numbered(entry, "input"))


def keep(entry: Path, made: NumericsRun) -> NumericsRun:
    """The worker's run moved into the cache; a run without outputs (over budget, a failing
    reference) is returned as it is and kept nowhere."""
    if made.files is None or not made.inputs:
        return made
    shutil.rmtree(entry, ignore_errors=True)
    entry.mkdir(parents=True)
    for number, path in enumerate(made.files):
        shutil.move(path, entry / f"reference-{number}.npy")
    for number, path in enumerate(made.inputs):
        shutil.move(path, entry / f"input-{number}.npy")
    (entry / _COMPLETE).touch()
    kept = cached(entry, made.key)
    assert kept is not None
    return kept


def _numbered(entry: Path, stem: str) -> list[str]:
    files = entry.glob(f"{stem}-*.npy")
    return [str(f) for f in sorted(files, key=lambda f: int(f.stem.rsplit("-", 1)[1]))]
