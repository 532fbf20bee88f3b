"""A task as it was when its evaluation began: its folder's files copied and hashed before any
code we did not write runs, so that the reference's outputs come from the copy, workers read
the copy (never the task folder's path) and a task file that changes during the evaluation
voids it. No jax here.

A derived task is snapshot with the ties tracing its reference found (kernels/traced_ties.py),
written beside the copy's files, so the workers that load the copy plan its held-out sizes as
the harness did.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels.loader import with_known_ties
from maxkernel_tui.kernels.task import Task, TaskError
from maxkernel_tui.kernels.traced_ties import TIES_FILE, planned_ties

MAX_FILES = 256
MAX_BYTES = 64 * 1024**2
_SKIPPED_DIRS = {"__pycache__", ".git", ".ipynb_checkpoints"}


@dataclass(frozen=True)
class TaskSnapshot:
    original: Task
    task: Task  # the same task, read from the copy
    digest: str  # of every file's relative path and content

    def change(self) -> str | None:
        """How the original folder differs from the copy now (a file named), else None."""
        try:
            files = _task_files(self.original.folder)
        except TaskError as error:
            return error.problem
        copied = _task_files(self.task.folder)
        for relative in sorted(set(files) | set(copied)):
            if relative not in files:
                return f"{relative} was removed"
            if relative not in copied:
                return f"{relative} was added"
            if _file_digest(files[relative]) != _file_digest(copied[relative]):
                return f"{relative} was modified"
        return None


def snapshot_task(task: Task, root: Path) -> TaskSnapshot:
    """Copy `task`'s folder under `root` (once per content: a copy with the same digest is
    reused) and return the task read from the copy; TaskError for a folder too large to copy."""
    task = with_known_ties(task, cache_dir())  # this runs where the harness does, never in a worker
    files = _task_files(task.folder)
    digest = _folder_digest(files)
    ties = planned_ties(task)
    safe_id = re.sub(r"[^A-Za-z0-9_.-]", "_", task.task_id)[:60]
    # one copy per content and traced ties: a task traced since its last copy plans anew
    planned = hashlib.sha256(ties.encode()).hexdigest()[:8] if ties else ""
    copy = root / f"{safe_id}-{digest[:20]}{planned}"
    if not copy.is_dir():
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
        for relative, path in files.items():
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            target.chmod(0o444)
        if ties:
            (staging / TIES_FILE).write_text(ties)
            (staging / TIES_FILE).chmod(0o444)
        try:
            staging.rename(copy)
        except OSError:  # another evaluation made the same copy first
            shutil.rmtree(staging, ignore_errors=True)
    expert = task.expert_path
    if expert is not None and expert.resolve().is_relative_to(task.folder.resolve()):
        expert = copy / expert.resolve().relative_to(task.folder.resolve())
    return TaskSnapshot(task, replace(task, folder=copy, expert_path=expert), digest)


def task_digest(task: Task) -> str:
    """The digest a snapshot of `task` taken now would have (every file's path and content),
    without copying anything: what a verdict on the task is keyed by."""
    return folder_digest(task.folder)


def folder_digest(folder: Path) -> str:
    """The digest of a task folder's files (their paths and contents)."""
    return _folder_digest(_task_files(folder))


def _task_files(folder: Path) -> dict[str, Path]:
    """Every regular file of the task folder by relative path (links are not followed)."""
    found: dict[str, Path] = {}
    total = 0
    for base, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(names):
            path = Path(base) / name
            if path.is_symlink() or not path.is_file() or name.endswith(".pyc"):
                continue
            if name == TIES_FILE and base == str(folder):
                continue  # ours, written beside a copy; never taken from a task's folder
            total += path.stat().st_size
            found[str(path.relative_to(folder))] = path
            if len(found) > MAX_FILES or total > MAX_BYTES:
                raise TaskError(
                    folder,
                    f"too large to snapshot for an evaluation (over {MAX_FILES} files or "
                    f"{MAX_BYTES // 1024**2} MiB): keep the task's files in a folder of their own",
                )
    return found


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _folder_digest(files: dict[str, Path]) -> str:
    digest = hashlib.sha256()
    for relative in sorted(files):
        digest.update(relative.encode() + b"\0" + _file_digest(files[relative]).encode())
    return digest.hexdigest()
