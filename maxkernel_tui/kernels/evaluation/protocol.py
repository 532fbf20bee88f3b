"""The evaluation's worker protocols as data: what the harness asks the candidate, reference and
timing processes (one JSON line in) and what they answer (JSON lines out). No jax here: the
workers write these types and the harness reads them back, each through one `from_json`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from maxkernel_tui.kernels.perf.calibration import ModelPoint
from maxkernel_tui.kernels.report.checks import Check

Run = tuple[str, int]  # (configuration, seed) of one numerics run
# The largest program the tracer may carry to the judge (tracer/program_pickle.py says why).
PROGRAM_MAX_BYTES = 64 * 2**20
Clock = Literal["device trace", "wall clock"]  # what measured a timing's samples
DEVICE_TRACE: Clock = "device trace"
WALL_CLOCK: Clock = "wall clock"


def _runs(data: Any) -> list[Run]:
    return [(str(config), int(seed)) for config, seed in data]


@dataclass(frozen=True)
class TilesRequest:
    """Sampled output tiles at production shapes (evaluation/tiles/sampled_run.py): the inputs'
    seed (fixed, so the reference's outputs are computed once and cached), the sample's seed
    (fresh per evaluation) and how many blocks beyond the grid's corners to draw."""

    input_seed: int
    sample_seed: int
    random_blocks: int
    inputs: list[str] = field(default_factory=list)  # the production inputs (.npy), a copy


@dataclass(frozen=True)
class CandidateRequest:
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
    # An agent's probe (harness.Probe): "" for an evaluation; "tpu_lower" or "tpu_compile" stop
    # after that stage; "numerics" runs `runs` without the production defences.
    probe: str = ""
    tiles: TilesRequest | None = None  # None: no sampled production tiles
    task_digest: str = ""  # the task's part of the compilation cache that the worker reads
    # The candidate's programs as the tracer carried them (configuration: file of
    # program_transport bytes): the judge runs these and never imports the kernel. Where the
    # kernel could not be traced (configuration: why), its runs there fail with that reason.
    programs: dict[str, str] = field(default_factory=dict)
    untraced: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CandidateRequest:
        tiles = data.get("tiles")
        return cls(
            **dict(
                data,
                runs=_runs(data["runs"]),
                tiles=None if tiles is None else TilesRequest(**tiles),
            )
        )


@dataclass(frozen=True)
class TraceRequest:
    """What the tracer (evaluation/tracer/candidate.py), the one process that imports the
    candidate, is asked: its programs at `configs`, written into `out_dir` as bytes."""

    kernel: str
    task: str
    configs: list[str]
    out_dir: str
    extra_configs: dict[str, dict[str, int]] = field(default_factory=dict)
    task_digest: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TraceRequest:
        return cls(**data)


def request_to_json(request: CandidateRequest | TraceRequest) -> dict[str, Any]:
    """A candidate worker's request line: {"trace": ...} or {"judge": ...}."""
    return {"trace" if isinstance(request, TraceRequest) else "judge": request.to_json()}


def request_from_json(data: Mapping[str, Any]) -> CandidateRequest | TraceRequest:
    if "trace" in data:
        return TraceRequest.from_json(data["trace"])
    return CandidateRequest.from_json(data["judge"])


@dataclass(frozen=True)
class Traced:
    """One program the tracer wrote (program_transport bytes) and the configuration it was
    traced at, or why it has none there (`error`; at the production shapes the tracer fails
    the trace check instead). Untrusted: the judge checks what the file holds against the task."""

    config: str
    file: str | None = None
    seconds: float = 0.0
    error: str | None = None


@dataclass(frozen=True)
class NumericsRun:
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

    @property
    def key(self) -> Run:
        return (self.config, self.seed)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NumericsRun:
        return cls(**data)


@dataclass(frozen=True)
class TilesRun:
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
    unsampleable: str | None = None
    seconds: float = 0.0
    shapes: list[list[int]] = field(default_factory=list)  # each output's, to name an index

    @property
    def key(self) -> Run:
        return (self.config, self.input_seed)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TilesRun:
        return cls(**data)


@dataclass(frozen=True)
class WorkerProblem:
    """The worker could not do its job: a wrong request (`usage`), or a bug in the harness."""

    detail: str
    usage: bool = False


@dataclass(frozen=True)
class Done:
    """The candidate worker's last line."""


CandidateEvent = Check | NumericsRun | TilesRun | Traced | WorkerProblem | Done


def event_to_json(event: CandidateEvent) -> dict[str, Any]:
    """One line of a candidate worker: {"check"}, {"run"}, {"tiles"}, {"traced"},
    {"usage_error"}, {"error"} or {"done"}."""
    if isinstance(event, Check):
        return {"check": event.to_json()}
    if isinstance(event, NumericsRun):
        return {"run": event.to_json()}
    if isinstance(event, TilesRun):
        return {"tiles": event.to_json()}
    if isinstance(event, Traced):
        return {"traced": asdict(event)}
    if isinstance(event, WorkerProblem):
        return {"usage_error" if event.usage else "error": {"detail": event.detail}}
    return {"done": {}}


def event_from_json(data: Mapping[str, Any]) -> CandidateEvent:
    (kind, payload), *_ = data.items()
    if kind == "check":
        return Check.from_json(payload)
    if kind == "run":
        return NumericsRun.from_json(payload)
    if kind == "tiles":
        return TilesRun.from_json(payload)
    if kind == "traced":
        return Traced(**payload)
    if kind in ("usage_error", "error"):
        return WorkerProblem(payload.get("detail", ""), usage=kind == "usage_error")
    if kind == "done":
        return Done()
    raise ValueError(f"not an event of the candidate protocol: {kind!r}")


@dataclass(frozen=True)
class ReferenceRequest:
    task: str
    runs: list[Run]
    out_dir: str
    extra_configs: dict[str, dict[str, int]] = field(default_factory=dict)
    production: ProductionRequest | None = None  # the production tiles' reference, if asked

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReferenceRequest:
        production = data.get("production")
        return cls(
            **dict(
                data,
                runs=_runs(data["runs"]),
                production=None if production is None else ProductionRequest(**production),
            )
        )


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


@dataclass(frozen=True)
class ReferenceAnswer:
    runs: list[NumericsRun] = field(default_factory=list)
    error: str | None = None  # the task itself could not be loaded

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return {"error": self.error}
        return {"runs": [run.to_json() for run in self.runs]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReferenceAnswer:
        runs = [NumericsRun.from_json(run) for run in data.get("runs", [])]
        return cls(runs, data.get("error"))


@dataclass(frozen=True)
class TimingRequest:
    program: str  # the candidate's carried program (evaluation/tracer/transport.py bytes)
    task: str
    config: str
    repeats: int
    warmups: int
    expert: str | None = None  # the task's expert baseline, timed interleaved with the others

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TimingRequest:
        return cls(**data)


@dataclass(frozen=True)
class TimingSamples:
    """Seconds per call of each program, interleaved call by call."""

    candidate: list[float]
    reference: list[float]
    expert: list[float] = field(default_factory=list)  # empty when the task has no expert


@dataclass(frozen=True)
class DeviceNumerics:
    """The candidate against the reference on the device, at the timed (production) shapes."""

    ok: bool
    detail: str


@dataclass(frozen=True)
class TimingAnswer:
    device: str  # jax's device kind
    platform: str  # tpu, cpu, ...
    samples: TimingSamples
    clock: Clock = WALL_CLOCK
    clock_note: str = ""  # why the wall clock where the device trace was wanted
    numerics: DeviceNumerics | None = None  # on a TPU only
    model: ModelPoint | None = None  # the model's estimate of the candidate (for calibration)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TimingAnswer:
        numerics, model = data.get("numerics"), data.get("model")
        return cls(
            **dict(
                data,
                samples=TimingSamples(**data["samples"]),
                numerics=None if numerics is None else DeviceNumerics(**numerics),
                model=None if model is None else ModelPoint.from_json(model),
            )
        )
