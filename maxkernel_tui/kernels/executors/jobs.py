"""What crosses from the driver to a node and back: the task folder's files and the kernel
source (never anything from the driver's environment), and the typed answers. Plain data that
Ray pickles; no Ray, no jax."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from maxkernel_tui.kernels.evaluation.options import EvalOptions
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.report.checks import EvalReport
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.kernels.traced_ties import TIES_FILE, planned_ties

# A task folder is a few source files; anything near this is not a task and is refused.
MAX_TASK_BYTES = 16 * 1024 * 1024
_SKIPPED_PARTS = ("__pycache__", ".git")


class TaskShippingError(ValueError):
    """The task folder cannot be sent to a node (too large, unreadable)."""


@dataclass(frozen=True)
class TaskFiles:
    """A task folder as bytes: its name, its files by relative path, and their digest (a node
    writes a folder once per digest)."""

    folder_name: str
    files: tuple[tuple[str, bytes], ...]
    digest: str

    @classmethod
    def of(cls, task: Task) -> TaskFiles:
        files, total = [], 0
        for path in sorted(task.folder.rglob("*")):
            relative = path.relative_to(task.folder)
            if not path.is_file() or any(p in _SKIPPED_PARTS for p in relative.parts):
                continue
            if relative == Path(TIES_FILE):
                continue  # ours: written below from the driver's plan
            try:
                data = path.read_bytes()
            except OSError as error:
                raise TaskShippingError(f"cannot read {path}: {error}") from None
            total += len(data)
            if total > MAX_TASK_BYTES:
                raise TaskShippingError(
                    f"task folder {task.folder} is over {MAX_TASK_BYTES // 2**20} MiB: not sent"
                )
            files.append((relative.as_posix(), data))
        if ties := planned_ties(task):  # the node plans the held-out sizes the driver planned
            files.append((TIES_FILE, ties.encode()))
        digest = hashlib.sha256()
        for name, data in files:
            digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        return cls(task.folder.name, tuple(files), digest.hexdigest()[:16])

    def write_under(self, root: Path) -> Path:
        """The folder written under `root/<digest>/` (again only when absent); its path."""
        folder = root / self.digest / self.folder_name
        if folder.is_dir():
            return folder
        staging = root / f"{self.digest}.partial"
        shutil.rmtree(staging, ignore_errors=True)  # left by an evaluation that died mid-write
        for name, data in self.files:
            target = staging / self.folder_name / name
            if ".." in Path(name).parts:
                raise TaskShippingError(f"refused a task file outside the folder: {name}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        staging.rename(root / self.digest)  # a reader never sees half a folder
        return folder


@dataclass(frozen=True)
class EvalJob:
    """One evaluation: the kernel (its source and name), the task, the harness options."""

    task: TaskFiles
    kernel: KernelSource
    options: EvalOptions


@dataclass(frozen=True)
class ProfileJob:
    """One profile of a kernel on the driver's TPU target (`trace`: run it under the profiler
    on the node, whose disk keeps the trace; `reference_costs` and `tolerance_passes`: from an
    earlier profile)."""

    task: TaskFiles
    kernel: KernelSource
    target: str
    trace: bool
    reference_costs: dict[str, ReferenceCost] | None = None
    tolerance_passes: int | None = None


@dataclass(frozen=True)
class EvalAnswer:
    """A node's evaluation: the same typed report the local harness gives, and the node."""

    node: str
    report: EvalReport


@dataclass(frozen=True)
class ProfileAnswer:
    """A node's profile, or why there is none, and the node."""

    node: str
    summary: ProfileSummary | None
    error: str | None = None
