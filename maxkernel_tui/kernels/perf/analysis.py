"""What the profile of a candidate finds, as data: the static analysis of each Pallas kernel
(blocks, grid, work per step), the reference's XLA cost per TPU generation, the trace, and the
profile worker's request and answer (one JSON line each way). No jax here: the worker writes
these types, the model, the summary, the UI and the agents read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from maxkernel_tui.codec import JsonData, Shape, Unknown
from maxkernel_tui.kernels.config_names import CHECK
from maxkernel_tui.kernels.perf.device_trace import DmaShare
from maxkernel_tui.kernels.perf.outside import OutsideTraffic
from maxkernel_tui.kernels.report.basis import Basis
from maxkernel_tui.kernels.task import Task


class MemorySpace(StrEnum):
    """Where a block lives."""

    VMEM = "vmem"  # pipelined through VMEM
    ANY = "any"  # left in HBM (the kernel copies it itself)
    SMEM = "smem"
    SEMAPHORE = "semaphore"


class Bound(StrEnum):
    """What takes the most of a kernel's estimated time (perf/model.py)."""

    MEMORY = "memory"
    COMPUTE = "compute"
    OVERHEAD = "overhead"  # the per-step overhead


@dataclass(frozen=True)
class Block:
    role: str  # input i / output i / scratch i
    shape: list[int]
    array_shape: list[int]  # the whole operand the block tiles
    dtype: str
    memory_space: MemorySpace
    bytes: int
    fetches: int  # how many times the pipeline moves it between HBM and VMEM

    @property
    def is_output(self) -> bool:
        return self.role.startswith("output")

    @property
    def is_scratch(self) -> bool:
        return self.role.startswith("scratch")


@dataclass(frozen=True)
class KernelAnalysis(JsonData):
    name: str
    grid: list[int]
    dimension_semantics: list[str]
    blocks: list[Block]
    scalar_prefetch: int
    vmem_bytes: int  # double-buffered pipelined blocks + scratch
    vmem_limit_bytes: int | None  # what the kernel asked for, if anything
    hbm_bytes: int  # total over the grid
    steps: int
    mxu_flops_per_step: float
    mxu_f32_flops_per_step: float  # the part with f32 operands (TpuTarget.f32_default_passes)
    vector_ops_per_step: float
    transcendentals_per_step: float
    matmul_dims: list[list[int]] = field(default_factory=list)  # (m, k, n) of each body matmul
    index_maps_exact: bool = True  # False: data-dependent index maps, fetch counts are upper bounds
    mxu_highest_flops_per_step: float = 0.0  # the f32 part at Precision.HIGHEST (six passes)
    # DMAs the body starts itself per step (operands left in HBM, memory_space=ANY): of a cond,
    # its busiest branch
    dma_starts_per_step: float = 0.0


@dataclass(frozen=True)
class ReferenceCost(
    JsonData, shape=Shape(alone="error", omit_none=("relayouts",), unknown=Unknown.IGNORE)
):
    """XLA's cost analysis of the reference compiled ahead of time for one TPU generation, or why
    it could not be compiled there (`error`). Read back from a stored profile too, whose labels
    (`kind`, `source`) are dropped."""

    flops: float | None = None
    bytes_accessed: float | None = None
    optimal_seconds: float | None = None
    error: str | None = None
    transcendentals: float | None = None  # exp, log, ... elements (a softmax's exponentials)
    # each matmul's [flops, bytes it streams, bytes of it `bytes_accessed` counts], from the
    # program's jaxpr (perf/pallas_analysis.matmul_traffic); XLA runs them as fusions of their own
    matmuls: list[list[float]] | None = None
    # [bytes read, bytes written] by the compiled program's copies into another layout
    # (perf/hlo_relayouts.py); XLA's cost analysis counts them in bytes_accessed
    relayouts: list[int] | None = None

    @classmethod
    def from_xla(
        cls,
        cost: Mapping[str, float],
        transcendentals: float | None = None,
        matmuls: list[list[float]] | None = None,
        relayouts: tuple[int, int] | None = None,
    ) -> ReferenceCost:
        """From `compiled.cost_analysis()`, whose keys have spaces; `transcendentals` counted
        from the program's jaxpr where the cost analysis has none (a TPU's has none), its
        matmuls one by one, which it sums, and its copies into another layout, which it counts
        with the rest."""
        return cls(
            cost.get("flops"),
            cost.get("bytes accessed"),
            cost.get("optimal_seconds"),
            # a TPU's cost analysis counts some fusions' transcendentals (a rotary embedding's
            # cos and sin) and not others (a softmax's exponentials): the larger count holds
            transcendentals=max(
                (n for n in (cost.get("transcendentals"), transcendentals) if n is not None),
                default=None,
            ),
            matmuls=matmuls,
            relayouts=None if relayouts is None else list(relayouts),
        )


@dataclass(frozen=True)
class TraceEvent:
    name: str
    milliseconds: float


@dataclass(frozen=True)
class Trace(JsonData):
    """A run of the kernel under jax.profiler: where it is, and the busiest events."""

    dir: str
    config: str
    kind: str  # "measured on TPU (device trace)" or a CPU interpret-mode run's host-side trace
    wall_seconds: float
    top_events: list[TraceEvent]
    dma: DmaShare | None = None  # from a TPU device trace only (measured)

    @property
    def measured(self) -> bool:
        return self.kind.startswith(Basis.MEASURED)


@dataclass(frozen=True)
class ProfileRequest(JsonData, shape=Shape(omit_empty=("gradients",))):
    # configuration: the candidate's program there, as the tracer carried it, in the worker's
    # private directory (the profile never imports the candidate)
    programs: dict[str, str]
    task: str  # the task's folder
    targets: list[str]
    trace_dir: str
    trace: bool = True  # False: the static analysis and the estimates only
    reference_costs: dict[str, ReferenceCost] = field(default_factory=dict)  # known already
    # the bf16 MXU passes XLA needs for the task's tolerance (perf/vs_xla.py), known already
    tolerance_passes: int | None = None
    # a training task's gradients: `programs` are then its backward programs, and the reference
    # cost is XLA's jax.vjp of the reference (forward and backward, fused as XLA fuses them)
    gradients: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ProfileAnswer(
    JsonData,
    shape=Shape(omit_empty=("gradients",), omit_none=("outside",), unknown=Unknown.IGNORE),
):
    config: str  # the configuration the static analysis used (production shapes)
    kernels: list[KernelAnalysis]
    reference_costs: dict[str, ReferenceCost]
    io_bytes: int | None = None  # inputs read and outputs written once
    trace: Trace | None = None
    # bf16 MXU passes of XLA running the reference as written, and at the precision the task's
    # tolerance needs (None: not found); perf/xla_model.XLA_PRECISIONS names them
    written_passes: int = 1
    tolerance_passes: int | None = None
    gradients: list[str] = field(default_factory=list)  # the request's: figures cover backward
    # the copies XLA makes around the kernels at production shapes (perf/outside.py)
    outside: OutsideTraffic | None = None


def trace_config(task: Task, on_tpu: bool) -> str | None:
    """Where a profile's trace runs the kernel: production shapes on a TPU, check shapes in
    interpret mode elsewhere; None where the task has no check shapes (no trace on a CPU)."""
    if on_tpu:
        return task.configs[0]
    return CHECK if CHECK in task.configs else None
