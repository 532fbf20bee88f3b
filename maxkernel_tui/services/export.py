"""A session's best kernel as a standalone file with its evaluation report in Markdown, for the
`export` command and the sessions screen. No jax here.

The best kernel is the store's one definition (`Store.best_kernel`: the best score among the
session's accepted versions, else its latest accepted version, else its latest version), as
every screen and command names it; the report says which rule picked it. The files are named
after the task (`<task_id>.py`, `<task_id>.md`), the names `bench --kernels DIR` reads.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from maxkernel_tui.kernels.report.status import CheckStatus, Verdict
from maxkernel_tui.kernels.service.portability import PortabilityRow
from maxkernel_tui.kernels.task import TaskError
from maxkernel_tui.services.evidence import CardSubject, EvidenceCard, version_card
from maxkernel_tui.services.sessions import local_time
from maxkernel_tui.services.tasks import task_argument, task_label
from maxkernel_tui.store import Evaluation, KernelVersion, Session, Store, StoreError
from maxkernel_tui.visible import visible

_MARKS = {"pass": "✓ pass", "fail": "✗ fail", "skip": "– skip"}


# The portability matrix of a kernel's source in a session's task (commands/export.py makes it
# on this machine's harness); None: the card says it was not computed.
Matrix = Callable[[Session, str], list[PortabilityRow]]


def export_session(
    store: Store, prefix: str, out: Path, matrix: Matrix | None = None
) -> list[Path]:
    """Write the best kernel of the session named by `prefix`, its report and its evidence card
    (Markdown and JSON) into `out`; the files written. StoreError when there is no such session
    or it has no kernel yet."""
    session = store.find_session(prefix)
    best = store.best_kernel(session.id)
    if best is None:
        raise StoreError(f"session {session.id} has no kernel yet")
    version = best.version
    parent = store.kernel_version(version.parent_id) if version.parent_id is not None else None
    written = write_export(out, session, version, best.evaluation, parent, best.words())
    card = kernel_card(store, session, version)
    if matrix is not None:
        card = card.with_portability(matrix(session, version.source))
    return written + write_card(out, session.task_id, card)


def kernel_card(store: Store, session: Session, version: KernelVersion) -> EvidenceCard:
    """The card of an exported version, with what it cost: its search node's steps when a
    search made it, else the whole session's."""
    node = next(
        (n for n in store.search_nodes(session.id) if n.kernel_version_id == version.id), None
    )
    if node is not None:
        tokens, cost = int(node.data.get("tokens", 0)), float(node.data.get("cost_usd", 0.0))
        cost_of = f"search node #{node.data.get('number', '?')}'s steps"
    else:
        tokens, cost = store.usage(session.id)
        cost_of = f"the whole session {session.id}"
    title = f"kernel v{version.number} of session {session.id}"
    return version_card(
        store,
        version.id,
        CardSubject.VERSION,
        title,
        tokens=tokens,
        cost_usd=cost,
        cost_of=cost_of,
    )


def write_card(out: Path, task_id: str, card: EvidenceCard) -> list[Path]:
    """`<task_id>.card.md` and `<task_id>.card.json` in `out`."""
    markdown, data = out / f"{task_id}.card.md", out / f"{task_id}.card.json"
    markdown.write_text(visible(card.to_markdown()))
    data.write_text(json.dumps(card.to_json(), indent=2, sort_keys=True) + "\n")
    return [markdown, data]


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
    source = version.source + ("" if version.source.endswith("\n") else "\n")
    kernel.write_text(header + source + _entry_point_alias(session, source))
    # the report quotes kernels, models and the task file: read in a terminal, it stays text
    markdown = markdown_report(session, version, evaluation, parent, because, kernel.name)
    report.write_text(visible(markdown))
    return [kernel, report]


def _entry_point_alias(session: Session, source: str) -> str:
    """A line that names the kernel by the task's own entry point where it defines only
    `computation` (the built-in agent's name; a JAXBench task's harness calls `workload`), so the
    exported file drops in as that task's `optimized.py`; "" where nothing is missing."""
    from maxkernel_tui.kernels.loader import defined_names, load_task, parse_python

    if not session.task_dir:
        return ""
    try:
        entry = load_task(session.task_dir, traced_ties=False).entry_points[0]
        names = defined_names(parse_python(Path("kernel.py"), source))
    except TaskError:  # the folder moved, or the kernel does not parse: nothing to name
        return ""
    if entry in names or "computation" not in names:
        return ""
    return f"\n\n{entry} = computation  # the name the task's own harness calls\n"


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
    failed = next(
        (c for c in report.get("checks", []) if c.get("status") == CheckStatus.FAIL), None
    )
    reason = f": {failed['name']}: {_cell(failed.get('detail', ''))}" if failed else ""
    targets = ", ".join(report.get("targets", [])) or "?"
    seeds = ", ".join(map(str, report.get("seeds", []))) or "-"
    # reports stored before verdicts said their scope have none
    scope = f", {report['scope']}" if report.get("scope") and verdict == Verdict.ACCEPTED else ""
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
