"""The evaluation's worker protocols as data: what the harness asks the candidate, reference and
timing processes (one JSON line in) and what they answer (JSON lines out). No jax here: the
workers write these types and the harness reads them back, each through the codec.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from maxkernel_tui.codec import JsonData, Shape, Tagged, Unknown
from maxkernel_tui.kernels.perf.calibration import ModelPoint
from maxkernel_tui.kernels.report.basis import Clock
from maxkernel_tui.kernels.report.checks import Check
from maxkernel_tui.kernels.report.reasons import DeviceNumerics as DeviceNumerics
from maxkernel_tui.kernels.report.reasons import Reason

Run = tuple[str, int]  # (configuration, seed) of one numerics run
# The largest program the tracer may carry to the judge (tracer/program_pickle.py says why).
PROGRAM_MAX_BYTES = 64 * 2**20
DEVICE_TRACE, WALL_CLOCK = Clock


class ProbeStage(StrEnum):
    """The stage an agent's probe stops after (Probe.through, CandidateRequest.probe)."""

    NONE = ""  # no probe: a whole evaluation (CandidateRequest's default)
    TPU_LOWER = "tpu_lower"
    TPU_COMPILE = "tpu_compile"
    NUMERICS = "numerics"  # one numerics run, without the production defences


@dataclass(frozen=True)
class TilesRequest:
    """Sampled output tiles at production shapes (evaluation/tiles/sampled_run.py): the inputs'
    seed (fixed, so the reference's outputs are computed once and cached), the sample's seed
    (a digest of the kernel and the task: tiles/plan.py) and how many blocks beyond the grid's
    corners to draw."""

    input_seed: int
    sample_seed: int
    random_blocks: int
    inputs: list[str] = field(default_factory=list)  # the production inputs (.npy), a copy


@dataclass(frozen=True)
class CandidateRequest(JsonData, shape=Shape(omit_empty=("gradients", "backward_programs"))):
    kernel: str  # the candidate's file, in its private directory
    task: str  # the task's folder
    target: str  # TPU generation to compile for
    bench_config: str  # production shapes: trace, lowering and compile
    runs: list[Run]
    out_dir: str  # where the outputs of the numerics runs go (.npy)
    extra_configs: dict[str, dict[str, int]] = field(default_factory=dict)  # validated edge cases
    detect_races: bool = False
    require_pallas: bool = True
    # The task's own expert baseline (Task.expert_path): heavy work it leaves to XLA (JAXBench's
    # optimized.py projects in XLA around its attention kernel) is reported, not rejected.
    expert_baseline: bool = False
    # Numerics on the edge cases only: production shapes were judged in an earlier evaluation.
    edges_only: bool = False
    # An agent's probe (options.Probe): NONE for an evaluation; TPU_LOWER or TPU_COMPILE stop
    # after that stage; NUMERICS runs `runs` without the production defences.
    probe: ProbeStage = ProbeStage.NONE
    tiles: TilesRequest | None = None  # None: no sampled production tiles
    task_digest: str = ""  # the task's part of the compilation cache that the worker reads
    # The candidate's programs as the tracer carried them (configuration: file of
    # program_transport bytes): the judge runs these and never imports the kernel. Where the
    # kernel could not be traced (configuration: why), its runs there fail with that reason.
    programs: dict[str, str] = field(default_factory=dict)
    untraced: dict[str, str] = field(default_factory=dict)
    # Parameters of computation whose gradients are judged (Task.gradients, the option's where
    # it gave them), and the candidate's backward programs (configuration: file), each a
    # function of the inputs and the outputs' cotangents giving those gradients.
    gradients: list[str] = field(default_factory=list)
    backward_programs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TraceRequest(JsonData, shape=Shape(omit_empty=("gradients",))):
    """What the tracer (evaluation/tracer/candidate.py), the one process that imports the
    candidate, is asked: its programs at `configs`, written into `out_dir` as bytes."""

    kernel: str
    task: str
    configs: list[str]
    out_dir: str
    extra_configs: dict[str, dict[str, int]] = field(default_factory=dict)
    task_digest: str = ""
    gradients: list[str] = field(default_factory=list)  # a backward program too, when given


# A candidate worker's request line: {"trace": ...} or {"judge": ...}.
_REQUESTS: Tagged[CandidateRequest | TraceRequest] = Tagged(
    {"trace": TraceRequest, "judge": CandidateRequest}
)


def request_to_json(request: CandidateRequest | TraceRequest) -> dict[str, Any]:
    return _REQUESTS.encode(request)


def request_from_json(data: Mapping[str, Any]) -> CandidateRequest | TraceRequest:
    return _REQUESTS.decode(data)


@dataclass(frozen=True)
class Traced:
    """One program the tracer wrote (program_transport bytes) and the configuration it was
    traced at, or why it has none there (`error`; at the production shapes the tracer fails
    the trace check instead). Untrusted: the judge checks what the file holds against the task."""

    config: str
    file: str | None = None
    seconds: float = 0.0
    error: str | None = None
    backward_file: str | None = None  # the backward program, when gradients were asked for


@dataclass(frozen=True)
class NumericsRun(JsonData, shape=Shape(omit_none=("gradient_files",))):
    """The outputs of one (configuration, seed) run, saved as files, or why there are none."""

    config: str
    seed: int
    files: list[str] | None = None
    error: str | None = None
    races: bool | None = None  # TPU interpret mode's race detector, when asked for
    seconds: float = 0.0
    inputs: list[str] | None = None  # the inputs' leaves (.npy), for cached production runs
    # A production tiles reference (ProductionRequest): True when `files` hold the outputs at the
    # sample's indices only (computed by regions), False when they hold whole outputs.
    at_indices: bool | None = None
    # The gradients asked for (one file per requested parameter, in the request's order) from
    # the same inputs and the seed's cotangents (evaluation/gradients.py); None: none asked.
    gradient_files: list[str] | None = None

    @property
    def key(self) -> Run:
        return (self.config, self.seed)


@dataclass(frozen=True)
class TilesRun(JsonData, shape=Shape(omit_empty=("gradients",))):
    """The candidate's sampled production tiles: per program output, the values the sample
    decides (`values`, .npy) at their flat indices (`indices`, .npy); or why there are none
    (`error`: the kernel failed; `unsampleable`: the program cannot be run by tiles)."""

    config: str
    input_seed: int
    sample_seed: int
    values: list[str] | None = None
    indices: list[str] | None = None
    kernels: list[str] = field(default_factory=list)  # one line per pallas_call sampled
    blocks: int = 0  # output blocks sampled, over every kernel
    of_blocks: int = 0
    error: str | None = None
    fault: Reason | None = None  # with `error`: a fault of the kernel found by the sampled run
    unsampleable: str | None = None
    seconds: float = 0.0
    shapes: list[list[int]] = field(default_factory=list)  # each output's, to name an index
    classes: int = 0  # classes of output blocks the sample covers, over every kernel
    # a sample of the backward program (evaluation/gradients.py): its outputs are the gradients
    # of these parameters, in this order; empty: the forward program's outputs
    gradients: list[str] = field(default_factory=list)

    @property
    def key(self) -> Run:
        return (self.config, self.input_seed)


@dataclass(frozen=True)
class WorkerProblem:
    """The worker could not do its job: a wrong request (`usage`), or a bug in the harness."""

    detail: str
    usage: bool = False


@dataclass(frozen=True)
class Done:
    """The candidate worker's last line."""


CandidateEvent = Check | NumericsRun | TilesRun | Traced | WorkerProblem | Done
# One line of a candidate worker: {"check"}, {"run"}, {"tiles"}, {"traced"}, {"usage_error"},
# {"error"} (a WorkerProblem, its `usage` said by the tag) or {"done"}.
_EVENTS: Tagged[CandidateEvent] = Tagged(
    {
        "check": Check,
        "run": NumericsRun,
        "tiles": TilesRun,
        "traced": Traced,
        "usage_error": (WorkerProblem, {"usage": True}),
        "error": (WorkerProblem, {"usage": False}),
        "done": Done,
    }
)


def event_to_json(event: CandidateEvent) -> dict[str, Any]:
    return _EVENTS.encode(event)


def event_from_json(data: Mapping[str, Any]) -> CandidateEvent:
    return _EVENTS.decode(data)


@dataclass(frozen=True)
class ReferenceRequest(JsonData, shape=Shape(omit_empty=("gradients",))):
    task: str
    runs: list[Run]
    out_dir: str
    extra_configs: dict[str, dict[str, int]] = field(default_factory=dict)
    production: ProductionRequest | None = None  # the production tiles' reference, if asked
    gradients: list[str] = field(default_factory=list)  # jax.vjp of the reference too


@dataclass(frozen=True)
class ProductionRequest:
    """What the production tiles check asks the reference worker (evaluation/reference/worker.py)
    at production shapes: without `inputs`, to make the inputs and save them (the harness keeps
    them in the cache, where candidates read them); with `inputs` (those files) and `indices`
    (per output, the flat indices the candidate's sample decides, .npy), the reference's outputs
    there, within the CPU budget."""

    config: str
    seed: int
    inputs: list[str] = field(default_factory=list)
    indices: list[str] = field(default_factory=list)
    # the reference's gradients of these parameters there (jax.vjp on the seed's cotangents),
    # for a sample of a candidate's backward; empty: its outputs
    gradients: list[str] = field(default_factory=list)

    __codec__: ClassVar[Shape] = Shape(omit_empty=("gradients",))


@dataclass(frozen=True)
class ReferenceAnswer(JsonData, shape=Shape(alone="error", unknown=Unknown.IGNORE)):
    runs: list[NumericsRun] = field(default_factory=list)
    error: str | None = None  # the task itself could not be loaded


@dataclass(frozen=True)
class TimingRequest(JsonData):
    program: str  # the candidate's carried program (evaluation/tracer/transport.py bytes)
    task: str
    config: str
    repeats: int
    warmups: int
    expert: str | None = None  # the task's expert baseline, timed interleaved with the others
    # the task's gradients: `program` is then the candidate's backward program (forward and
    # backward), timed against XLA's jax.vjp of the reference on the seeds' cotangents
    gradients: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TimingSamples:
    """Seconds per call of each program, interleaved call by call."""

    candidate: list[float]
    reference: list[float]
    expert: list[float] = field(default_factory=list)  # empty when the task has no expert


@dataclass(frozen=True)
class TimingAnswer(JsonData, shape=Shape(omit_empty=("gradients",))):
    device: str  # jax's device kind
    platform: str  # tpu, cpu, ...
    samples: TimingSamples
    clock: Clock = WALL_CLOCK
    clock_note: str = ""  # why the wall clock where the device trace was wanted
    numerics: DeviceNumerics | None = None  # on a TPU only
    model: ModelPoint | None = None  # the model's estimate of the candidate (for calibration)
    gradients: list[str] = field(default_factory=list)  # timed forward and backward (the request's)
