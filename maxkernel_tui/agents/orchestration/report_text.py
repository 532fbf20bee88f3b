"""An evaluation report as the agents and the log read it: the check that rejected the kernel,
and the whole report in lines. No jax here."""

from __future__ import annotations

from maxkernel_tui.agents.roles.context import Failure
from maxkernel_tui.kernels.report.checks import EvalReport


def failure_of(report: EvalReport) -> Failure | None:
    """The check that rejected the kernel, if one did."""
    failed = report.failure
    return None if failed is None else Failure(failed.name, failed.detail, failed.reason)


def failure_text(report: EvalReport) -> str:
    failure = failure_of(report)
    return "no check decided" if failure is None else str(failure)


def evaluation_text(report: EvalReport) -> str:
    """The report as the agents read it."""
    lines = [f"verdict: {report.verdict}"]
    lines += [f"{c.status} {c.name}: {c.detail}" for c in report.checks]
    lines += [t.label for t in report.timings]
    return "\n".join(lines)
