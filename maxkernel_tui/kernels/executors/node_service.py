"""What one node of a cluster runs for the driver, kept alive between evaluations (inside a Ray
actor; no Ray here): `slots` harnesses, each with its pre-warmed candidate worker and its
reference worker, so that jax is not imported per candidate, and the task folders the driver
sent, written once per content digest into the node's own temporary directory.

Every isolation rule of the local harness holds here, because it is the local harness: a
fresh process per candidate with a scrubbed environment (of this node's own environment: the
driver's never reaches it), its own temp dir, memory and CPU limits, and the process group
killed on timeout. No jax in this process."""

from __future__ import annotations

import os
import queue
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from maxkernel_tui.kernels.evaluation.harness import Harness
from maxkernel_tui.kernels.evaluation.profiling.profile import ProfileError, profile_kernel
from maxkernel_tui.kernels.executors.jobs import (
    EvalAnswer,
    EvalJob,
    ProfileAnswer,
    ProfileJob,
    TaskFiles,
)
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import Task


def node_label(node_id: str) -> str:
    """How a node is named in reports and events: its host and the start of its Ray id."""
    return f"{socket.gethostname()}/{node_id[:8]}" if node_id else socket.gethostname()


class NodeService:
    """`slots` evaluations at a time on this node, each on a harness of its own."""

    def __init__(self, slots: int, node_id: str = "") -> None:
        self.node = node_label(node_id)
        self._root = Path(tempfile.mkdtemp(prefix="mkt-node-"))
        self._harnesses: queue.Queue[Harness] = queue.Queue()
        for _ in range(max(1, slots)):
            self._harnesses.put(Harness())
        self._tasks: dict[str, Task] = {}
        self._tasks_lock = threading.Lock()

    def ping(self) -> str:
        """The node's label, once its harnesses are started (a driver waits on this)."""
        return self.node

    def pid(self) -> int:
        return os.getpid()

    def evaluate(self, job: EvalJob) -> EvalAnswer:
        task = self._task(job.task)
        with self._harness() as harness:
            report = harness.evaluate(job.kernel, task, job.options)
        report.executor_node = self.node
        return EvalAnswer(self.node, report)

    def profile(self, job: ProfileJob) -> ProfileAnswer:
        task = self._task(job.task)
        try:
            summary = profile_kernel(
                job.kernel,
                task,
                targets=(job.target,),
                trace_root=self._root / "traces",
                trace=job.trace,
                reference_costs=job.reference_costs,
                tolerance_passes=job.tolerance_passes,
            )
        except ProfileError as error:
            return ProfileAnswer(self.node, None, str(error))
        return ProfileAnswer(self.node, summary)

    def close(self) -> None:
        while not self._harnesses.empty():
            self._harnesses.get_nowait().close()
        shutil.rmtree(self._root, ignore_errors=True)

    def _task(self, files: TaskFiles) -> Task:
        with self._tasks_lock:
            if files.digest not in self._tasks:
                self._tasks[files.digest] = load_task(files.write_under(self._root / "tasks"))
            return self._tasks[files.digest]

    @contextmanager
    def _harness(self) -> Iterator[Harness]:
        harness = self._harnesses.get()  # the actor admits no more calls than slots
        try:
            yield harness
        finally:
            self._harnesses.put(harness)
