"""The production tiles check's files in the user's cache, computed once per task and seed: the
production inputs (which candidates read, never write) and, for a reference whose outputs cannot
be computed by regions (evaluation/reference/slices.py), its whole production outputs (which no
candidate can read). No jax: the reference worker makes them in its own sandboxed directory and
the harness, which alone may write the cache, keeps them here.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels.task import Task

_COMPLETE = "complete"  # written last: a folder without it is an interrupted entry


def inputs_root() -> Path:
    """Where every task's production inputs are kept: readable by the candidate and reference
    workers (the inputs are the task's own, from a fixed seed; nothing here is secret)."""
    return cache_dir() / "production-inputs"


def folder(task: Task, config: str, seed: int) -> Path:
    """Where one (task, configuration, seed)'s whole reference outputs are kept: named by the
    task's files and the jax that computes them, so an edited task or another jax computes them
    again."""
    return cache_dir() / "production-reference" / _entry_name(task, config, seed)


def inputs_folder(task: Task, config: str, seed: int) -> Path:
    return inputs_root() / _entry_name(task, config, seed)


# The reference's values at one sample's indices are kept for this many samples per task: the
# same kernel evaluated again (or its edge pass) reads them instead of recomputing its blocks.
KEPT_SAMPLES = 8


def at_indices_folder(task: Task, config: str, seed: int, index_files: list[str]) -> Path:
    """Where the reference's outputs at one sample's flat indices (`index_files`, one per
    output) are kept, named by the (task, configuration, seed) entry and the indices' bytes."""
    digest = hashlib.blake2b(digest_size=12)
    for path in index_files:
        with open(path, "rb") as indices:
            digest.update(hashlib.file_digest(indices, "blake2b").digest())
    root = cache_dir() / "production-reference-at"
    return root / f"{_entry_name(task, config, seed)}-{digest.hexdigest()}"


def prune_samples(entry: Path) -> None:
    """All but the KEPT_SAMPLES most recently kept samples of the entry's task removed."""
    task_prefix = entry.name.rsplit("-", 1)[0]
    kept = sorted(
        (p for p in entry.parent.glob(f"{task_prefix}-*") if p.is_dir()),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in kept[KEPT_SAMPLES:]:
        shutil.rmtree(old, ignore_errors=True)


def _entry_name(task: Task, config: str, seed: int) -> str:
    from maxkernel_tui.versions import installed_version  # importlib.metadata: not at start-up

    digest = hashlib.sha256(f"{installed_version('jax')}|{config}|{seed}".encode())
    for path in task.defining_files:
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    safe_id = re.sub(r"[^A-Za-z0-9_.-]", "_", task.task_id)
    return f"{safe_id}-{digest.hexdigest()[:20]}"


def cached(entry: Path, stem: str) -> list[str] | None:
    """The entry's `<stem>-N.npy` files in order, or None when it is missing or incomplete."""
    if not (entry / _COMPLETE).exists():
        return None
    files = entry.glob(f"{stem}-*.npy")
    return [str(f) for f in sorted(files, key=lambda f: int(f.stem.rsplit("-", 1)[1]))]


def keep(entry: Path, stem: str, made: list[str]) -> list[str]:
    """Files a worker made, moved into the cache as `<stem>-N.npy`, and their new paths."""
    shutil.rmtree(entry, ignore_errors=True)
    entry.mkdir(parents=True)
    for number, path in enumerate(made):
        shutil.move(path, entry / f"{stem}-{number}.npy")
    (entry / _COMPLETE).touch()
    kept = cached(entry, stem)
    assert kept is not None
    return kept
