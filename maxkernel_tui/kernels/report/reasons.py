"""Why a check ended as it did: a code (`Reason`) and the figures it rests on, as typed data.
Words are made from them only where a report is shown (report/words.py). Plain data; no jax."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, ClassVar, get_args

from maxkernel_tui.codec import Shape, Tagged, decode_object, encode_object
from maxkernel_tui.kernels.report.expert import ExpertComparison
from maxkernel_tui.kernels.report.status import CheckStatus


class Reason(StrEnum):
    # the source and the task
    STATIC_OK = "static_ok"
    STATIC_RULES_BROKEN = "static_rules_broken"  # Problems: each rule broken, in its words
    SOURCE_UNREADABLE = "source_unreadable"
    SNAPSHOT_FAILED = "snapshot_failed"
    TASK_CHANGED = "task_changed"
    HARNESS_ERROR = "harness_error"
    # a worker that did not finish
    WORKER_TIMED_OUT = "worker_timed_out"
    WORKER_OUT_OF_MEMORY = "worker_out_of_memory"
    WORKER_CRASHED = "worker_crashed"
    SANDBOX_REFUSED = "sandbox_refused"  # the kernel tried what the sandbox refuses
    # the tracer's word, checked
    TRACER_NOT_PROTOCOL = "tracer_not_protocol"
    TRACER_UNBELIEVABLE = "tracer_unbelievable"
    TRACER_NO_PROGRAM = "tracer_no_program"
    PROGRAM_REFUSED = "program_refused"
    # the trace check
    TRACE_REFUSED = "trace_refused"  # the kernel's program is not run: Said why
    IMPORT_FAILED = "import_failed"
    UNTRACEABLE = "untraceable"  # no program at production shapes: Said why
    PROGRAM_UNWRITABLE = "program_unwritable"  # something the kernel planted was in the way
    SANITY_RUN = "sanity_run"
    NO_PALLAS_CALL = "no_pallas_call"
    HEAVY_WORK_OUTSIDE_PALLAS = "heavy_work_outside_pallas"
    EXPERT_WORK_OUTSIDE_PALLAS = "expert_work_outside_pallas"  # reported, not rejected
    PALLAS_HOLDS_THE_WORK = "pallas_holds_the_work"
    # the trace check of the backward program (tasks that ask for gradients)
    BACKWARD_UNTRACEABLE = "backward_untraceable"  # no backward program: Said why
    BACKWARD_NO_PALLAS_CALL = "backward_no_pallas_call"
    BACKWARD_WORK_OUTSIDE_PALLAS = "backward_work_outside_pallas"
    BACKWARD_IN_PALLAS = "backward_in_pallas"
    # TPU lowering and compilation
    LOWERED = "lowered"
    LOWERING_FAILED = "lowering_failed"
    COMPILED = "compiled"
    COMPILE_FAILED = "compile_failed"
    # the production defences
    NO_CHECK_CONFIG = "no_check_config"
    NO_PROGRAM_AT_CHECK = "no_program_at_check"  # defences not applied: Said why
    DEFENCES_UNMEASURABLE = "defences_unmeasurable"  # defences not applied: the analysis failed
    PRODUCTION_REFUSED = "production_refused"
    DEFENCES_HELD = "defences_held"
    DEFENCES_BROKEN = "defences_broken"
    BACKWARD_DEFENCES_HELD = "backward_defences_held"  # Defences of the backward program
    BACKWARD_DEFENCES_BROKEN = "backward_defences_broken"
    UNFIT_TILES = "unfit_tiles"  # a derived configuration the kernel's own tiles do not fit
    # numerics
    WITHIN_TOLERANCE = "within_tolerance"
    OUTSIDE_TOLERANCE = "outside_tolerance"
    NON_FINITE = "non_finite"  # NaN or infinity where the reference is finite
    GRADIENT_OUTSIDE_TOLERANCE = "gradient_outside_tolerance"  # RunFigures.gradient names it
    OUTPUT_MISMATCH = "output_mismatch"  # output count or shape
    NO_OUTPUT = "no_output"
    KERNEL_FAILED = "kernel_failed"
    REFERENCE_RUN_FAILED = "reference_run_failed"
    REFERENCE_FAILED = "reference_failed"
    RACE_DETECTED = "race_detected"
    NOT_JUDGED = "not_judged"  # no comparison at any shape the kernel fits
    NO_EDGE_CONFIGS = "no_edge_configs"
    # production tiles
    TILES_SAMPLED = "tiles_sampled"
    TILES_NOT_RUN = "tiles_not_run"
    TILES_REFERENCE_FAILED = "tiles_reference_failed"
    TILES_KERNEL_FAILED = "tiles_kernel_failed"
    TILES_OUTPUT_COUNT = "tiles_output_count"
    TILES_MALFORMED = "tiles_malformed"
    TILES_OUTSIDE_TOLERANCE = "tiles_outside_tolerance"
    TILES_NONE_DECIDED = "tiles_none_decided"
    TILES_STATE_CARRIED = "tiles_state_carried"  # outputs change with what earlier blocks left
    TILES_OUTPUT_REVISITED = "tiles_output_revisited"  # an output block left and come back to
    # every sampled element within tolerance; the error distribution projected to the whole
    # output is not (evaluation/tiles/projection.py); on a TPU the device's comparison decides
    TILES_PROJECTED_OUTSIDE = "tiles_projected_outside"
    TILES_LEFT_TO_DEVICE = "tiles_left_to_device"
    # timing
    NO_TPU = "no_tpu"
    TIMING_BUSY = "timing_busy"  # another timing holds the TPU
    TIMING_FAILED = "timing_failed"
    TIMING_NOT_ON_TPU = "timing_not_on_tpu"
    WRONG_ON_DEVICE = "wrong_on_device"
    SPEEDUP_SIGNIFICANT = "speedup_significant"
    SPEEDUP_NOT_SIGNIFICANT = "speedup_not_significant"
    # the expert
    EXPERT_NOT_COMPARED = "expert_not_compared"
    EXPERT_COMPARED = "expert_compared"
    # the sandbox
    CONFINED = "confined"
    NO_SANDBOX_POLICY = "no_sandbox_policy"
    SANDBOX_LAYERS_MISSING = "sandbox_layers_missing"  # the user opted out of some
    # a check stored before reasons existed: its words are all there is
    WORDS_ONLY = "words_only"


@dataclass(frozen=True)
class NoFigures:
    pass


NO_FIGURES = NoFigures()


@dataclass(frozen=True)
class Said:
    """Someone else's words: an exception, a worker's message, a Mosaic error, a rule's text."""

    text: str


@dataclass(frozen=True)
class At:
    config: str  # a configuration, or the file (an expert) it happened at
    text: str  # what happened there, in someone else's words


@dataclass(frozen=True)
class Configs:
    configs: tuple[str, ...]


class StaticRule(StrEnum):
    """The rules a candidate's source is held to (evaluation/static/checks.py)."""

    TOO_LARGE = "too_large"
    DOES_NOT_PARSE = "does_not_parse"
    NO_ENTRY_POINT = "no_entry_point"
    HOST_CALLBACK = "host_callback"
    PLATFORM_BRANCH = "platform_branch"


@dataclass(frozen=True)
class RuleBroken:
    rule: StaticRule
    text: str  # the rule's sentence, naming the line or the size


@dataclass(frozen=True)
class Problems:
    """The static rules a source breaks."""

    problems: tuple[RuleBroken, ...]


@dataclass(frozen=True)
class WorkerFailed:
    process: str  # "tracer", "candidate"
    text: str  # the worker's failure, in its words
    limit_gib: float | None = None  # the memory limit it met


class TracerClaim(StrEnum):
    """What a tracer sent that our tracer never would."""

    JUDGES_CHECK = "judges_check"  # a check only the judge gives
    UNASKED_PROGRAM = "unasked_program"  # a program not asked for, or sent twice
    JUDGES_EVENT = "judges_event"  # a line only the judge sends


@dataclass(frozen=True)
class Unbelievable:
    claim: TracerClaim
    name: str  # the check, the configuration, or the kind of line
    status: CheckStatus | None = None  # the check's (a JUDGES_CHECK claim)


class Mismatch(StrEnum):
    """Outputs that cannot be compared element by element, or hold NaN or infinity."""

    OUTPUT_COUNT = "output_count"
    OUTPUT_SHAPE = "output_shape"
    NON_FINITE = "non_finite"


@dataclass(frozen=True)
class Comparison:
    """Candidate outputs against the reference's (evaluation/compare.py)."""

    ok: bool
    max_abs: float
    max_rel: float  # over the elements with |reference| > atol; 0 when there are none
    tolerance_used: float  # max |Δ| / (atol + rtol·|reference|): > 1 fails
    worst_index: tuple[int, ...]
    mismatched: int
    total: int
    mismatch: Mismatch | None = None
    # OUTPUT_COUNT: the counts (one number each); OUTPUT_SHAPE: the shapes
    got: tuple[int, ...] = ()
    wanted: tuple[int, ...] = ()
    non_finite: int = 0  # outputs NaN or infinite where the reference is finite
    first_non_finite: tuple[int, ...] = ()  # where the first is
    first_is_nan: bool = False  # it is NaN, not infinite

    @property
    def reason(self) -> Reason:
        """Why a comparison that is not ok fails."""
        if self.non_finite:
            return Reason.NON_FINITE
        return Reason.OUTPUT_MISMATCH if self.mismatch else Reason.OUTSIDE_TOLERANCE


@dataclass(frozen=True)
class RunFigures:
    """One numerics run: where, and how it compared (or what failed there)."""

    config: str
    seed: int
    atol: float = 0.0
    rtol: float = 0.0
    comparison: Comparison | None = None
    error: str | None = None
    gradient: str | None = None  # the parameter whose gradient was compared; None: the outputs

    __codec__: ClassVar[Shape] = Shape(omit_none=("gradient",))  # forward-only JSON as before


@dataclass(frozen=True)
class Agreement:
    runs: tuple[RunFigures, ...]


@dataclass(frozen=True)
class TilesFigures:
    """A sample of a production grid's output tiles, and how it compared."""

    config: str
    input_seed: int
    sample_seed: int
    blocks: int
    of_blocks: int
    kernels: tuple[str, ...] = ()
    elements: int = 0
    atol: float = 0.0
    rtol: float = 0.0
    comparison: Comparison | None = None
    outputs: int = 0  # how many outputs the kernel gave, where it gave too few or too many
    expected: int = 0
    text: str = ""  # an error or why nothing was sampled, in the worker's words
    classes: int = 0  # classes of output blocks (by the kernels' scalar control) covered
    # the largest share of the tolerance projected over the whole output (evaluation/tiles/
    # projection.py) from how many checked elements of how many (the output it is worst in),
    # and about how many elements over the tolerance
    projected: float | None = None
    projected_from: int = 0
    of_elements: int = 0
    projected_over: int = 0
    # a sample of the backward program's kernels (tasks that ask for gradients): the gradients
    # it compared, or the one that failed; empty: the forward's outputs
    gradients: str = ""

    __codec__: ClassVar[Shape] = Shape(omit_empty=("gradients",))


@dataclass(frozen=True)
class Misfit:
    """An output block of the kernel's own tiling that does not fit the size of its axis at a
    derived configuration (production_checks.tiles_misfit)."""

    kernel: str
    output: int
    axis: int
    block: int
    size: int  # the axis's length at the derived configuration
    untraced: str = ""  # why the kernel refused to be traced there, in its words


@dataclass(frozen=True)
class Unfit:
    config: str  # the derived configuration not run
    misfit: Misfit
    numerics: DefenceOutcome  # the production numerics defence's: where the numerics are judged
    edge_pass: bool = False  # an edge-case pass: the full evaluation judges them


@dataclass(frozen=True)
class NotJudged:
    configs: tuple[str, ...]
    # the production tiles check's reason and figures; None: no tiles were asked for
    tiles: Reason | None = None
    tiles_figures: Annotated[
        NoFigures | Said | TilesFigures,
        Tagged({"none": NoFigures, "said": Said, "tiles": TilesFigures}),
    ] = NO_FIGURES


@dataclass(frozen=True)
class WorkShare:
    pallas_calls: int
    xla_flops: float  # outside the Pallas kernels
    xla_reduced: float
    outputs: str  # the program's outputs and how they are compared


@dataclass(frozen=True)
class OutsidePallas:
    """Heavy work left to XLA outside the Pallas kernels, against the reference's."""

    xla_flops: float
    xla_reduced: float
    reference_flops: float
    reference_reduced: float
    heavy_ops: tuple[str, ...] = ()  # the heaviest operations outside, in words
    outputs: str = ""


class DefenceName(StrEnum):
    """The defences at production shapes (evaluation/work/production_checks.py)."""

    WORK = "work"
    COVERAGE = "coverage"
    BODIES = "bodies"
    NUMERICS = "numerics"


class DefenceOutcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_APPLICABLE = "not applicable"
    # production shapes run in full (interpret mode where affordable, or the TPU)
    SCHEDULED = "scheduled"
    # sampled output tiles of the production grid run (evaluation/tiles/sampled_run.py)
    SAMPLED = "sampled"


class Finding(StrEnum):
    """What a defence found, which its outcome rests on."""

    NO_REFERENCE_WORK = "no_reference_work"
    NO_KERNEL_WORK = "no_kernel_work"
    DATA_DEPENDENT_WORK = "data_dependent_work"
    TOO_LITTLE_WORK = "too_little_work"
    ENOUGH_WORK = "enough_work"
    COVERAGE_UNKNOWN = "coverage_unknown"  # DMA, data-dependent index maps or a huge grid
    COVERAGE_SHRINKS = "coverage_shrinks"
    COVERED = "covered"
    NO_KERNELS = "no_kernels"
    OPERATIONS_DROPPED = "operations_dropped"
    MATMUL_TYPES_CHANGED = "matmul_types_changed"
    SAME_BODIES = "same_bodies"
    RUN_ON_TPU = "run_on_tpu"
    RUN_INTERPRETED = "run_interpreted"
    TILES_TO_RUN = "tiles_to_run"
    TOO_LARGE_TO_RUN = "too_large_to_run"


@dataclass(frozen=True)
class MatmulWork:
    config: str
    flops: float  # the kernel's matmul flops, inside Pallas and left to XLA
    needed: float  # the reference's
    conditional: float  # the part of `flops` under cond / pl.when
    floor: float  # the least share of `needed` a kernel must do


@dataclass(frozen=True)
class Coverage:
    covered: float  # the least share of an output the production grid writes
    checked: float = 1.0  # and the grid at the checked shapes


@dataclass(frozen=True)
class Bodies:
    kernels: int
    checked_kernels: int
    dropped: tuple[str, ...] = ()  # operations the checked bodies use and these do not
    matmul_types: tuple[str, ...] = ()
    checked_matmul_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProductionSize:
    """Production shapes against what interpret mode affords."""

    flops: float  # the reference's
    steps: int  # the kernels' grid steps
    input_bytes: int
    flops_limit: float
    steps_limit: int
    bytes_limit: int


DefenceFigures = Annotated[
    NoFigures | MatmulWork | Coverage | Bodies | ProductionSize,
    Tagged(
        {
            "none": NoFigures,
            "work": MatmulWork,
            "coverage": Coverage,
            "bodies": Bodies,
            "size": ProductionSize,
        }
    ),
]


@dataclass(frozen=True)
class Defence:
    name: DefenceName
    outcome: DefenceOutcome
    finding: Finding
    figures: DefenceFigures = NO_FIGURES


@dataclass(frozen=True)
class Defences:
    defences: tuple[Defence, ...]


@dataclass(frozen=True)
class Ratio:
    ratio: float
    low: float
    high: float  # the 95% interval


@dataclass(frozen=True)
class DeviceNumerics:
    """The candidate against the reference on the device, at the timed (production) shapes."""

    ok: bool
    config: str
    output: int = 0  # the output that failed
    comparison: Comparison | None = None  # its comparison, where one output failed
    outputs: int = 0  # how many outputs the kernel gave, where that is not how many it should
    expected: int = 0


@dataclass(frozen=True)
class Timed:
    speedup: Ratio  # over the XLA reference
    device_clock: bool  # device time from the profiler trace; False: the wall clock
    expert: Ratio | None = None
    device_numerics: DeviceNumerics | None = None  # the device's own comparison
    clock_note: str = ""  # why the wall clock, where it was a fallback (the profiler's words)


@dataclass(frozen=True)
class Confinement:
    active: tuple[str, ...]
    missing: tuple[tuple[str, str], ...]  # layer, why it is not in force
    lacking: tuple[str, ...]  # the required layers missing (the user opted out of them)
    confined: bool


@dataclass(frozen=True)
class Target:
    name: str
    text: str = ""  # the compiler's error, where it failed


Figures = (
    NoFigures
    | Said
    | At
    | Configs
    | Problems
    | WorkerFailed
    | Unbelievable
    | Agreement
    | RunFigures
    | TilesFigures
    | Unfit
    | NotJudged
    | WorkShare
    | OutsidePallas
    | Defences
    | Timed
    | DeviceNumerics
    | Confinement
    | Target
    | ExpertComparison
)
_KINDS: dict[str, type[Any]] = {kind.__name__: kind for kind in get_args(Figures)}


def figures_to_json(figures: Figures) -> dict[str, Any]:
    """The figures' JSON, with their kind under `type`."""
    return {"type": type(figures).__name__, **encode_object(figures)}


def figures_from_json(data: Mapping[str, Any]) -> Figures:
    values = dict(data)
    figures: Figures = decode_object(_KINDS[values.pop("type")], values)
    return figures
