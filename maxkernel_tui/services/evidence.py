"""The evidence card of a candidate kernel (a proposal waiting for approval, a search node, a
version in the log): each check and where it was earned (seeds, shapes, production blocks and
classes, precision), the portability matrix across TPU generations, what a TPU measured beside
what the model estimates, and the tokens and dollars it cost. Built from the store (a node's or
a version's stored evaluation and profile) or from a report in hand (a proposal judged ahead of
the engineer's key); rendered as Markdown (the card screen, `export`) and JSON (`export`).
No Textual, no jax."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from maxkernel_tui.codec import JsonData
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.report.checks import EvalReport, format_check
from maxkernel_tui.kernels.service.portability import GENERATIONS, PortabilityRow
from maxkernel_tui.store.db import Store

NOT_JUDGED = "not judged yet"


class CardSubject(StrEnum):
    PROPOSAL = "proposal"
    NODE = "search node"
    VERSION = "kernel version"


@dataclass(frozen=True)
class EvidenceCard(JsonData):
    subject: CardSubject
    title: str  # "search node #7 (kernel v5)"
    task_id: str
    verdict: str  # the report's verdict line, or NOT_JUDGED
    checks: list[str] = field(default_factory=list)  # a line per check, as `eval` prints them
    evidence: list[str] = field(default_factory=list)  # where each verdict was earned
    measured: list[str] = field(default_factory=list)  # what a TPU timed, with its device
    estimates: list[str] = field(default_factory=list)  # the model's, against XLA, per target
    portability: list[PortabilityRow] = field(default_factory=list)  # [] until computed
    tokens: int = 0
    cost_usd: float = 0.0
    cost_of: str = ""  # whose tokens they are: "node #7's steps", "the step that proposed it"
    notes: list[str] = field(default_factory=list)

    def with_portability(self, rows: list[PortabilityRow]) -> EvidenceCard:
        return replace(self, portability=rows)

    def to_markdown(self) -> str:
        lines = [f"## Evidence card: {self.title}", "", f"*{self.task_id}* · **{self.verdict}**"]
        lines += [f"> {note}" for note in self.notes]
        lines += ["", "### Checks", "", "```", *(self.checks or ["no checks ran"]), "```"]
        if self.evidence:
            lines += ["", "### Where each verdict was earned", ""]
            lines += [f"- {_md(line)}" for line in self.evidence]
        lines += ["", "### Portability across TPU generations", "", *self._matrix()]
        lines += ["", "### Measured on a TPU", ""]
        lines += [f"- {_md(line)}" for line in self.measured] or [
            "- nothing measured: no TPU timed this kernel (the figures above are estimates)"
        ]
        if self.estimates:
            lines += ["", "### Estimates (the performance model)", ""]
            lines += [f"- {_md(line)}" for line in self.estimates]
        lines += [
            "",
            "### Cost",
            "",
            f"{self.tokens:,} tokens · ${self.cost_usd:.4f} ({self.cost_of})",
        ]
        return "\n".join(lines) + "\n"

    def _matrix(self) -> list[str]:
        if not self.portability:
            return [
                f"not computed yet ({', '.join(GENERATIONS)}: a libtpu compile each and the "
                "model's estimate)"
            ]
        rows = [
            "| TPU | compiles | VMEM (est.) | time (est.) | vs XLA (est.) | vs expert (est.) |",
            "|---|---|---|---|---|---|",
        ]
        for row in self.portability:
            rows.append(
                f"| {row.target} | {_compiles(row)} | {_vmem(row)} | {_ms(row.seconds)} | "
                f"{row.vs_xla.short() if row.vs_xla else '?'} | {_ratio(row.vs_expert)} |"
            )
        refused = [r for r in self.portability if r.reason]
        rows += ["", *(f"- **{r.target}**: {_md(compiler_words(r.reason))}" for r in refused)]
        basis = self.portability[0].basis
        return [*rows, f"*compiles: libtpu ahead of time, at production shapes; figures {basis}*"]


def report_card(
    subject: CardSubject,
    title: str,
    task_id: str,
    report: EvalReport | None,
    profile: ProfileSummary | None,
    *,
    tokens: int = 0,
    cost_usd: float = 0.0,
    cost_of: str = "",
    notes: list[str] | None = None,
) -> EvidenceCard:
    """The card of a kernel judged by `report` and profiled by `profile` (either may be None)."""
    measured: list[str] = []
    if report is not None:
        measured = [t.label for t in report.timings]
        if report.expert is not None:
            measured.append(f"expert: {report.expert.label}")
    estimates = (
        [profile.against_xla(e.target) for e in profile.estimates] if profile is not None else []
    )
    return EvidenceCard(
        subject,
        title,
        task_id,
        report.verdict_line if report is not None else NOT_JUDGED,
        [format_check(c) for c in report.checks] if report is not None else [],
        list(report.evidence) if report is not None else [],
        measured,
        estimates,
        [],
        tokens,
        cost_usd,
        cost_of,
        list(notes or []),
    )


def version_card(
    store: Store,
    version_id: int,
    subject: CardSubject,
    title: str,
    *,
    tokens: int = 0,
    cost_usd: float = 0.0,
    cost_of: str = "",
) -> EvidenceCard:
    """The card of a stored kernel version: its latest evaluation and profile."""
    version = store.kernel_version(version_id)
    session = store.session(version.session_id)
    evaluations = store.evaluations(version_id)
    profiles = store.profiles(version_id)
    report = EvalReport.from_json(evaluations[-1].report) if evaluations else None
    profile = _profile(profiles[-1].profile) if profiles else None
    return report_card(
        subject,
        title,
        session.task_id,
        report,
        profile,
        tokens=tokens,
        cost_usd=cost_usd,
        cost_of=cost_of or "not recorded for a version alone",
    )


def _profile(data: dict[str, Any]) -> ProfileSummary | None:
    return ProfileSummary.from_json(data) if data else None


REASON_CHARS = 300  # of a compiler's refusal on the card (the JSON keeps all of it)


def compiler_words(reason: str) -> str:
    """The part of a compiler's refusal that says why (libtpu prints the program's allocations
    after it): the sentence that names the limit exceeded, after the error's code."""
    parts = [p.strip() for p in reason.replace(" | ", ". ").split(". ") if p.strip()]
    why = next((p for p in parts if "exceed" in p.lower()), None)
    head = parts[0] if parts else reason
    text = f"{head} … {why}" if why is not None and why != head else head
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def _compiles(row: PortabilityRow) -> str:
    if row.compiles is None:
        return "not reached"
    return "✓ yes" if row.compiles else "✗ no (below)"


def _vmem(row: PortabilityRow) -> str:
    if row.vmem_bytes is None or not row.vmem_capacity:
        return "?"
    return f"{row.vmem_bytes / 2**20:.1f}/{row.vmem_capacity / 2**20:.0f} MiB"


def _ms(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds * 1e3:.3f} ms"


def _ratio(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}x"


def _md(text: str) -> str:
    """`text` with Markdown's emphasis and table marks taken literally."""
    return "".join(f"\\{c}" if c in "\\`*_[]<>|" else c for c in text)
