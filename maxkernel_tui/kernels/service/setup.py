"""Where and how every evaluation and profile runs (`EvaluationSetup`, built from the settings
here alone): the executor (`ray`: `--ray ADDRESS`, `[executor]` in the config file, and the
per-command `--ray-insecure`), the harness's options and the profiler's. The workbench (ctrl+e,
ctrl+o, F5), the agents, and the `eval`, `profile`, `run`, `search` and `bench` commands all take
their setup from `EvaluationSetup.of`, so they evaluate with the same seeds, tiles and target on
the same executor. Ray is imported only when it is chosen. No jax."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.evaluation.options import EvalOptions
from maxkernel_tui.kernels.evaluation.profiling.profile import ProfileOptions
from maxkernel_tui.kernels.evaluation.tiles.plan import DEFAULT_TILE_BLOCKS, TILE_BLOCKS_VARIABLE
from maxkernel_tui.kernels.executors.errors import ClusterError
from maxkernel_tui.kernels.perf.calibration import default_calibration_file

# what a command's flags are made of, for its help (the defaults it names)
__all__ = [
    "DEFAULT_TILE_BLOCKS",
    "TILE_BLOCKS_VARIABLE",
    "EvalOptions",
    "EvaluationSetup",
    "ExecutorChoice",
    "ProfileOptions",
]


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
            from maxkernel_tui.kernels.service.ray_backend import shared_dispatcher
        except ImportError as error:
            raise ClusterError(
                f"--ray needs Ray ({error}): pip install 'maxkernel-tui[ray]'"
            ) from None
        shared_dispatcher(self.ray, self.insecure)

    def slots(self) -> int:
        """Evaluations that can run at once: the connected cluster's slots, else 1."""
        if self.ray is None:
            return 1
        from maxkernel_tui.kernels.service.ray_backend import shared_dispatcher

        return shared_dispatcher(self.ray, self.insecure).slots

    def release(self) -> None:
        """The end of a command: the node services end, this process leaves the cluster."""
        if self.ray is not None:
            from maxkernel_tui.kernels.service.ray_backend import release_shared

            release_shared()


@dataclass(frozen=True)
class EvaluationSetup:
    """Where evaluations run and with which options: one per workbench, session or command."""

    executor: ExecutorChoice
    options: EvalOptions
    profile: ProfileOptions

    @classmethod
    def of(
        cls,
        settings: Settings,
        *,
        insecure: bool = False,
        profile_targets: tuple[str, ...] = (),
        **overrides: Any,
    ) -> EvaluationSetup:
        """The settings' setup: the settings' executor and TPU target, `EvalOptions`' defaults
        (seeds, tiles, timeout), the profile on that target calibrated by the TPU timings
        measured so far. A command's flags come as `overrides` of `EvalOptions` fields and
        `profile_targets`, and replace only what they name."""
        options = replace(EvalOptions(target=settings.tpu_target), **overrides)
        profile = ProfileOptions(profile_targets or (options.target,), default_calibration_file())
        return cls(ExecutorChoice.of(settings, insecure), options, profile)

    @classmethod
    def local(cls, options: EvalOptions) -> EvaluationSetup:
        """This machine's workers with `options`, profiling on their target uncalibrated."""
        return cls(ExecutorChoice(), options, ProfileOptions((options.target,)))

    def on_target(self, target: str) -> EvaluationSetup:
        """The same setup for another TPU generation (a resumed session keeps its own)."""
        if target == self.options.target:
            return self
        return replace(
            self,
            options=replace(self.options, target=target),
            profile=replace(self.profile, targets=(target,)),
        )

    @property
    def executor_words(self) -> str:
        """Where evaluations run, in words: "local workers" or "Ray at HOST:PORT"."""
        ray = self.executor.ray
        return "local workers" if ray is None else f"Ray at {ray}"
