"""What an evaluation found: checks, timings, verdict. Plain data; no jax."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from maxkernel_tui.codec import JsonData, Shape, Unknown
from maxkernel_tui.kernels.config_names import HELDOUT
from maxkernel_tui.kernels.report.basis import Basis
from maxkernel_tui.kernels.report.expert import ExpertComparison
from maxkernel_tui.kernels.report.reasons import (
    NO_FIGURES,
    Figures,
    Reason,
    Said,
    TilesFigures,
    Unfit,
    figures_from_json,
    figures_to_json,
)
from maxkernel_tui.kernels.report.status import CheckName, CheckStatus, Verdict
from maxkernel_tui.kernels.report.words import check_words, sampled_blocks_words

PASS, FAIL, SKIP = CheckStatus.PASS, CheckStatus.FAIL, CheckStatus.SKIP
ACCEPTED, REJECTED = Verdict.ACCEPTED, Verdict.REJECTED
NUMERICS, EDGE, TILES = CheckName.NUMERICS, CheckName.EDGE, CheckName.TILES
# Where a verdict was earned: the kernel's own outputs compared at production shapes (sampled
# tiles, a full production run, device numerics on a TPU), or only at the smaller shapes.
VERIFIED_AT_PRODUCTION = "verified at production shapes"
SMALL_SHAPES_ONLY = "checked at small shapes only"
PARTLY_VERIFIED = "partly verified at production shapes"  # then what was, in parentheses
ON_DEVICE = " (the whole output compared on the device)"  # after VERIFIED_AT_PRODUCTION
_CHECK_NAME = re.compile(r"[a-z_]+")  # the head of an `inputs` line names checks
NOTE = "note"  # the head of an `inputs` line that names no check: a task's warning
# The JSON key (in a check's `data`) of Check.production_shapes.
PRODUCTION_SHAPES = "production_shapes"


def numerics_check(config: str, *, edge: bool) -> CheckName:
    """The check that judges a numerics run at `config`: the held-out shapes, an edge case,
    or the task's other configurations."""
    if config == HELDOUT:
        return CheckName.HELDOUT
    return EDGE if edge else NUMERICS


@dataclass
class Check:
    """One check's outcome: its reason (a code) and the figures it rests on; its words
    (`detail`) are made from them (report/words.py)."""

    name: CheckName
    status: CheckStatus
    reason: Reason
    figures: Figures = NO_FIGURES
    seconds: float = 0.0
    # a passed check that compared the kernel's outputs at production shapes
    production_shapes: bool = False

    @property
    def detail(self) -> str:
        return check_words(self.reason, self.figures)

    @property
    def of_backward(self) -> bool:
        """A check of a training kernel's backward program, beside its forward's of the same
        name (trace, production, tiles)."""
        sampled = isinstance(self.figures, TilesFigures) and bool(self.figures.gradients)
        return sampled or self.reason.value.startswith("backward_")

    @property
    def unfit_config(self) -> str | None:
        """The derived configuration this check left unrun because the kernel's own tiles do
        not fit its shapes (evaluation/work/production_checks.py, tiles_misfit)."""
        return self.figures.config if isinstance(self.figures, Unfit) else None

    def to_json(self) -> dict[str, Any]:
        data = figures_to_json(self.figures)
        if self.production_shapes:
            data[PRODUCTION_SHAPES] = True
        return {
            "name": self.name,
            "status": self.status,
            "reason": self.reason,
            "detail": self.detail,
            "seconds": self.seconds,
            "data": data,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Check:
        """Also reads a check stored before reasons: its words are kept as they were."""
        figures = dict(data.get("data") or {})
        at_production = bool(figures.pop(PRODUCTION_SHAPES, False))
        name, status = CheckName(data["name"]), CheckStatus(data["status"])
        seconds = float(data.get("seconds", 0.0))
        if "reason" not in data:
            said = Said(str(data.get("detail", "")))
            return cls(name, status, Reason.WORDS_ONLY, said, seconds, at_production)
        reason = Reason(data["reason"])
        return cls(name, status, reason, figures_from_json(figures), seconds, at_production)


@dataclass(frozen=True)
class Timing(JsonData, shape=Shape(omit_none=True, old_keys={"ci95": ("ci95_s",)})):
    """One timed figure of a report: a median (`median_s`, `ci95`) or a ratio (`ratio`, `ci95`),
    always measured on a real device, which `device` names."""

    what: str  # "kernel", "XLA reference", SPEEDUP
    kind: Basis  # always MEASURED: a report shows only what a device timed
    device: str
    label: str  # the figure in words, with its device
    median_s: float | None = None
    ratio: float | None = None
    ci95: tuple[float, float] | None = None  # seconds for a median, a ratio's own bounds otherwise
    samples: int | None = None
    significant: bool | None = None


# its verdict, scope and evidence are written for readers and derived again when read
_REPORT_SHAPE = Shape(
    keys={"task_id": "task"},
    derived=("verdict", "scope", "evidence"),
    derived_after="device",
    skip=("on_check",),
    omit_empty=("gradients",),
    unknown=Unknown.IGNORE,
)


@dataclass
class EvalReport(JsonData, shape=_REPORT_SHAPE):
    task_id: str
    kernel: str
    targets: list[str]
    device: str  # where numerics and timings ran, in words
    checks: list[Check] = field(default_factory=list)
    # Timings only from a real device; each says measured/estimated and where.
    timings: list[Timing] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    # The kernel beside the task's expert baseline (evaluation/expert_comparison.py).
    expert: ExpertComparison | None = None
    # On which shapes and inputs each verdict was earned, in words (evaluation/provenance.py).
    inputs: list[str] = field(default_factory=list)
    # Where it ran: "local" (this machine's worker pool) or the Ray node that produced it.
    executor_node: str = "local"
    # Called with each check as it is added, so a UI can show progress before the verdict.
    on_check: Callable[[Check], None] | None = field(default=None, repr=False, compare=False)
    # The gradients the task asks for (a training kernel's): its scope must cover them too.
    gradients: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        decided = [c for c in self.checks if c.status != SKIP]
        if any(c.status == FAIL for c in self.checks) or not decided:
            return REJECTED
        return ACCEPTED

    @property
    def failure(self) -> Check | None:
        return next((c for c in self.checks if c.status == FAIL), None)

    @property
    def scope(self) -> str:
        """VERIFIED_AT_PRODUCTION when passed checks compared at production shapes the kernel's
        outputs and every gradient the task asks for (in full, or on sampled tiles that decide
        elements of it); PARTLY_VERIFIED naming what was when only some of those were;
        SMALL_SHAPES_ONLY when none was."""
        passed = [c for c in self.checks if c.status == PASS]
        in_full = [c for c in passed if c.production_shapes]
        # numerics in full compare outputs and gradients alike; the device's comparison of a
        # training kernel runs its backward program, whose outputs are the gradients
        forward = any(c.name != CheckName.TIMING or not self.gradients for c in in_full)
        forward = forward or any(c.name == TILES and not c.of_backward for c in passed)
        decided = {
            name
            for c in passed
            if c.name == TILES and isinstance(c.figures, TilesFigures) and c.figures.gradients
            for name in c.figures.gradients.split(", ")
        }
        if in_full:
            decided |= set(self.gradients)
        verified = [g for g in self.gradients if g in decided]
        if forward and len(verified) == len(self.gradients):
            return VERIFIED_AT_PRODUCTION
        if not forward and not verified:
            return SMALL_SHAPES_ONLY
        left = [g for g in self.gradients if g not in decided]
        said = (["the outputs"] if forward else []) + [f"the gradient of {g}" for g in verified]
        unsaid = ([] if forward else ["the outputs"]) + [f"the gradient of {g}" for g in left]
        return f"{PARTLY_VERIFIED} ({', '.join(said)}; {', '.join(unsaid)} at small shapes only)"

    @property
    def compared_on_device(self) -> bool:
        """The whole production output was compared with the reference's on a TPU (the timing
        worker's device numerics) and agreed."""
        timing = CheckName.TIMING
        checks = self.checks
        return any(c.status == PASS and c.name == timing and c.production_shapes for c in checks)

    @property
    def evidence(self) -> list[str]:
        """What the verdict rests on, one line each: the shapes and seeds of the checks that ran
        (`inputs`; a planned check that never ran says so), the derived configurations the
        kernel's tiles do not fit, the production tiles sampled or why none were, the device
        numerics."""
        lines = [line for planned in self.inputs for line in self._ran(planned)]
        for check in self.checks:
            if check.name == TILES:
                tiles = check.figures
                sampled = (
                    f"{sampled_blocks_words(tiles)}, "
                    f"sample seed {tiles.sample_seed}, inputs seed {tiles.input_seed}"
                    if isinstance(tiles, TilesFigures) and tiles.blocks and check.status != SKIP
                    else check.detail  # a skipped check's detail says why nothing was compared
                )
                of = (
                    f" of the backward (gradients of {tiles.gradients})"
                    if isinstance(tiles, TilesFigures) and tiles.gradients
                    else ""
                )
                lines.append(f"production tiles{of} ({check.status}): {sampled}")
            elif check.unfit_config is not None:  # a derived configuration left for production
                lines.append(check.detail)
            elif check.name == "timing" and check.production_shapes:
                lines.append(f"device numerics at production shapes ({check.status})")
        return lines

    def _ran(self, planned: str) -> list[str]:
        """A line of `inputs` ("check[, check]: where") for the checks of it that ran, and
        one for those that did not; other lines (notes) as they are."""
        head, sep, where = planned.partition(": ")
        names = [name.strip() for name in head.split(",")]
        if not sep or head == NOTE or not all(_CHECK_NAME.fullmatch(name) for name in names):
            return [planned]
        ran = {c.name for c in self.checks if c.status != SKIP}
        done = [name for name in names if name in ran]
        missing = [name for name in names if name not in ran]
        failure = self.failure
        why = f"stopped at {failure.name}" if failure is not None else "skipped"
        return ([f"{', '.join(done)}: {where}"] if done else []) + (
            [f"{', '.join(missing)}: not run ({why})"] if missing else []
        )

    @property
    def verdict_line(self) -> str:
        """An acceptance and the scope it was earned at, or a rejection and its first failure's
        reason (which names the shapes it failed at)."""
        failure = self.failure
        if self.verdict == ACCEPTED:
            where = ON_DEVICE if self.compared_on_device else ""
            return f"verdict: ACCEPTED, {self.scope}{where}"
        reason = f": {failure.name}: {failure.detail}" if failure else ""
        return f"verdict: REJECTED{reason}"

    def add(self, check: Check) -> Check:
        self.checks.append(check)
        if self.on_check is not None:
            self.on_check(check)
        return check

    def with_edge_pass(self, edge_pass: EvalReport) -> EvalReport:
        """This (full) report joined with the edge-case pass of the same kernel
        (EvalOptions.edges_only): the pass's `edge` check, or the check that stopped it, goes
        where a full evaluation puts `edge` (after numerics); seeds, timings and the expert
        comparison stay this report's."""
        added = [c for c in edge_pass.checks if c.name == EDGE or c.status == FAIL]
        names = [c.name for c in self.checks]
        at = names.index(NUMERICS) + 1 if NUMERICS in names else len(names)
        inputs = self.inputs + [line for line in edge_pass.inputs if line not in self.inputs]
        checks = self.checks[:at] + added + self.checks[at:]
        return replace(self, checks=checks, inputs=inputs, on_check=None)


_MARKS = {PASS: "✓", FAIL: "✗", SKIP: "-"}


def format_check(check: Check) -> str:
    return f"{_MARKS[check.status]} {check.name:<12} {check.detail}  [{check.seconds:.1f}s]"


def format_report(report: EvalReport) -> str:
    """A line per check, then the verdict and the reason."""
    targets = ", ".join(report.targets)
    lines = [f"{report.task_id} ← {report.kernel}  (TPU target {targets}; {report.device})"]
    for check in report.checks:
        lines.append(f"  {format_check(check)}")
    for timing in report.timings:
        lines.append(f"  timing: {timing.label}")
    if report.expert is not None:
        lines.append(f"  expert: {report.expert.label}")
    lines += [f"  evidence: {line}" for line in report.evidence]
    lines.append(report.verdict_line)
    return "\n".join(lines)
