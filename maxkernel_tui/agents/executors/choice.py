"""Which executor a command runs on, from the settings (`ray`: `--ray ADDRESS`, `[executor]` in
the config file) and the per-command `--ray-insecure`; and building the tools for it. Ray is
imported only when it is chosen. No jax."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from maxkernel_tui.agents.orchestration.tools import KernelTools, Tools
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.evaluation.harness import Harness
from maxkernel_tui.kernels.executors.errors import ClusterError
from maxkernel_tui.kernels.task import Task


class ClosableTools(Tools, Protocol):
    """Tools that say how many evaluations they run at once, and end their workers."""

    @property
    def slots(self) -> int: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ExecutorChoice:
    """`ray`: the head's HOST:PORT or `local`; None for this machine's worker pool.
    `insecure`: connect to a cluster without token authentication (never stored)."""

    ray: str | None = None
    insecure: bool = False

    @property
    def kind(self) -> str:
        return "local" if self.ray is None else "ray"

    @classmethod
    def of(cls, settings: Settings, insecure: bool = False) -> ExecutorChoice:
        return cls(settings.ray, insecure)

    def prepare(self) -> None:
        """Connect now (to the cluster, for Ray), so that one that cannot be used is said before
        anything else happens: ClusterError (a ValueError) with the reason."""
        if self.ray is None:
            return
        try:
            from maxkernel_tui.agents.executors.ray_tools import shared_dispatcher
        except ImportError as error:
            raise ClusterError(
                f"--ray needs Ray ({error}): pip install 'maxkernel-tui[ray]'"
            ) from None
        shared_dispatcher(self)

    def slots(self) -> int:
        """Evaluations that can run at once: the connected cluster's slots, else 1."""
        if self.ray is None:
            return 1
        from maxkernel_tui.agents.executors.ray_tools import shared_dispatcher

        return shared_dispatcher(self).slots

    def release(self) -> None:
        """The end of a command: the node services end, this process leaves the cluster."""
        if self.ray is not None:
            from maxkernel_tui.agents.executors.ray_tools import release_shared

            release_shared()


def build_tools(
    choice: ExecutorChoice,
    task: Task,
    target: str,
    trace_root: Path,
    harness: Callable[[], Harness] | None = None,
) -> ClosableTools:
    """The tools on `choice`'s executor; a cluster that cannot be used raises ClusterError (a
    ValueError) here, before any model call."""
    if choice.ray is None:
        return KernelTools(task, target, trace_root, harness=harness)
    from maxkernel_tui.agents.executors.ray_tools import RayTools

    return RayTools.connect(choice, task, target, trace_root)
