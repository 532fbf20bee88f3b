"""A session's best kernel as a standalone file with its evaluation report in Markdown, for the
`export` command and the sessions screen. No jax here.

The best kernel is the one the session ended on (its best accepted kernel, as the log and the
workbench name it); for a session that has not ended, the one of the latest accepted evaluation,
else the latest version. The files
are named after the task (`<task_id>.py`, `<task_id>.md`), the names `bench --kernels DIR` reads.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from maxkernel_tui.kernels.evaluation.report import ACCEPTED
from maxkernel_tui.services.sessions import local_time
from maxkernel_tui.services.tasks import task_argument, task_label
from maxkernel_tui.store import Evaluation, KernelVersion, Session, Store, StoreError
from maxkernel_tui.visible import visible

_MARKS = {"pass": "✓ pass", "fail": "✗ fail", "skip": "– skip"}


def export_session(store: Store, prefix: str, out: Path) -> list[Path]:
    """Write the best kernel of the session named by `prefix` and its report into `out`; the files
    written. StoreError when there is no such session or it has no kernel yet."""
    from maxkernel_tui.agents.orchestration.ending import best_at_end  # not for the first frame

    session = store.find_session(prefix)
    ended = best_at_end(store, session.id)
    evaluation: Evaluation | None
    if ended is not None and ended.version is not None:
        # the kernel the session ended on, as its log and the workbench name it
        version = ended.version
        accepted = [e for e in store.evaluations(version.id) if e.verdict == ACCEPTED]
        evaluation = accepted[-1] if accepted else None
        because = f"the best accepted kernel the session ended on ({ended.score_words})"
    else:
        best = store.best_kernel(session.id)
        if best is None:
            raise StoreError(f"session {session.id} has no kernel yet")
        version, evaluation = best
        because = _chosen_because(store, version, evaluation)
    parent = store.kernel_version(version.parent_id) if version.parent_id is not None else None
    return write_export(out, session, version, evaluation, parent, because)


def _chosen_because(store: Store, version: KernelVersion, evaluation: Evaluation | None) -> str:
    if evaluation is not None and evaluation.verdict == "accepted":
        return "the kernel of the session's latest accepted evaluation"
    count = len(store.kernel_versions(version.session_id))
    return f"no accepted evaluation in this session: the latest of its {count} kernel version(s)"


def write_export(
    out: Path,
    session: Session,
    version: KernelVersion,
    evaluation: Evaluation | None,
    parent: KernelVersion | None,
    because: str,
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    kernel, report = out / f"{session.task_id}.py", out / f"{session.task_id}.md"
    verdict = evaluation.verdict if evaluation else "not evaluated"
    header = visible(
        f"# {session.task_id}: kernel v{version.number} of maxkernel-tui session {session.id} "
        f"({verdict}). Report: {report.name}\n"
    )
    kernel.write_text(header + version.source + ("" if version.source.endswith("\n") else "\n"))
    # the report quotes kernels, models and the task file: read in a terminal, it stays text
    markdown = markdown_report(session, version, evaluation, parent, because, kernel.name)
    report.write_text(visible(markdown))
    return [kernel, report]


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def markdown_report(
    session: Session,
    version: KernelVersion,
    evaluation: Evaluation | None,
    parent: KernelVersion | None,
    because: str,
    kernel_file: str,
) -> str:
    lines = [f"# {session.task_id}: kernel v{version.number}", ""]
    task = shlex.quote(task_argument(session.task_id, session.task_dir))  # this task, no other
    origin = f", from v{parent.number}" if parent else ""
    title = f" — {_cell(session.title)}" if session.title else ""
    lines += [
        "| | |",
        "|---|---|",
        f"| session | `{session.id}` ({session.mode}, {session.status}){title} |",
        f"| task | `{task_label(session.task_id, session.task_dir)}` |",
        f"| kernel | v{version.number}, {local_time(version.created)}{origin} |",
        f"| chosen as | {because} |",
        f"| file | `{kernel_file}` |",
    ]
    if evaluation is None:
        lines += [
            "",
            "## Evaluation",
            "",
            f"Not evaluated. Run `maxkernel-tui eval {kernel_file} --task {task}`.",
        ]
    else:
        lines += ["", *evaluation_markdown(evaluation.report, evaluation.created)]
    if version.plan.strip():
        lines += ["", "## Plan", "", version.plan.strip()]
    lines += [
        "",
        "## Reproduce",
        "",
        f"    maxkernel-tui eval {kernel_file} --task {task}",
        "",
    ]
    return "\n".join(lines)


def evaluation_markdown(report: dict[str, Any], created: float) -> list[str]:
    verdict = str(report.get("verdict", "unknown"))
    failed = next((c for c in report.get("checks", []) if c.get("status") == "fail"), None)
    reason = f": {failed['name']}: {_cell(failed.get('detail', ''))}" if failed else ""
    targets = ", ".join(report.get("targets", [])) or "?"
    seeds = ", ".join(map(str, report.get("seeds", []))) or "-"
    # reports stored before verdicts said their scope have none
    scope = f", {report['scope']}" if report.get("scope") and verdict == "accepted" else ""
    lines = [
        "## Evaluation",
        "",
        f"**{verdict.upper()}**{scope}{reason}",
        "",
        *[f"- evidence: {_cell(line)}" for line in report.get("evidence", [])],
        "",
        (
            f"Evaluated {local_time(created)} for TPU {targets}; "
            f"{report.get('device', '?')}; seeds {seeds}."
        ),
        "",
        "| check | result | detail | seconds |",
        "|---|---|---|---:|",
    ]
    for check in report.get("checks", []):
        status = check.get("status")
        lines.append(
            f"| {_cell(check.get('name', '?'))} | {_MARKS.get(status, status)} "
            f"| {_cell(check.get('detail', ''))} | {float(check.get('seconds', 0.0)):.1f} |"
        )
    lines += ["", "### Timings", ""]
    timings = report.get("timings") or []
    if timings:
        lines += [f"- {_cell(t.get('label', t))}" for t in timings]
    else:
        lines.append("None: timings are measured only on a real TPU.")
    return lines
