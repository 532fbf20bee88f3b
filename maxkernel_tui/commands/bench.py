"""`maxkernel-tui bench`: evaluate a directory of candidates against a suite. No jax here.

Candidates are files named after task ids (`12p_RMSNorm.py`, or just `12p.py`). Without
`--kernels`, every reference is evaluated against itself: a sanity run of the whole pipeline.
Results are appended to a JSON-lines file as each task finishes, so an interrupted run resumes
where it stopped (a task is redone only when its kernel or task files changed). With `--ray`,
the tasks are evaluated side by side on the cluster's nodes, each row naming its node.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maxkernel_tui.codec import JsonData
from maxkernel_tui.commands.agent_flags import add_executor_flags, setup_of
from maxkernel_tui.config import cache_dir, flag_of, settings_from_args
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_tasks
from maxkernel_tui.kernels.report.basis import SPEEDUP
from maxkernel_tui.kernels.report.checks import ACCEPTED, EvalReport, Timing
from maxkernel_tui.kernels.report.expert import MATCHES_EXPERT, ExpertComparison
from maxkernel_tui.kernels.report.status import Verdict
from maxkernel_tui.kernels.service.service import EvaluationService, Harness, KernelSource
from maxkernel_tui.kernels.service.setup import EvalOptions, EvaluationSetup
from maxkernel_tui.kernels.targets import DEFAULT_TARGET
from maxkernel_tui.kernels.task import Task, TaskError


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "bench",
        help="evaluate a directory of candidate kernels against a suite",
        description="Evaluate candidates named after task ids against a suite; without --kernels, "
        "every reference against itself (sanity run). Prints a table and a summary; resumes.",
    )
    parser.add_argument(
        "--suite",
        default="builtin",
        metavar="builtin|DIR",
        help="the built-in suite or a folder of task folders (default builtin)",
    )
    parser.add_argument(
        "--kernels", type=Path, metavar="DIR", help="folder of <task_id>.py candidates"
    )
    parser.add_argument(
        flag_of("tpu_target"),
        dest="tpu_target",
        metavar="GEN",
        help=f"TPU generation (default: the tpu_target setting, {DEFAULT_TARGET} unless set)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help=f"limit per candidate (default {EvalOptions.timeout:g})",
    )
    parser.add_argument(
        "--results",
        type=Path,
        metavar="FILE",
        help="JSON-lines results file to resume from (default: in the cache directory)",
    )
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    add_executor_flags(parser)
    parser.set_defaults(run=run)


@dataclass(frozen=True)
class BenchRow(JsonData):
    """One task's result, as appended to the results file (JSON lines) and printed by --json."""

    key: str  # digest of the kernel, the task's files and the options: a change redoes the task
    task: str
    kernel: str
    verdict: Verdict
    failed_check: str | None
    detail: str
    timings: list[Timing]
    seconds: float
    expert: ExpertComparison | None = None  # beside the task's expert baseline, where one exists
    executor_node: str = "local"  # where it was evaluated: this machine, or a Ray node
    scope: str = ""  # where the verdict was earned (EvalReport.scope); "" in older results

    @property
    def significantly_faster(self) -> bool:
        return any(t.significant and t.what == SPEEDUP for t in self.timings)

    @classmethod
    def of(cls, key: str, task: Task, kernel: Path, report: EvalReport) -> BenchRow:
        failed = report.failure
        return cls(
            key=key,
            task=task.task_id,
            kernel=str(kernel),
            verdict=report.verdict,
            failed_check=failed.name if failed else None,
            detail=failed.detail if failed else "",
            timings=report.timings,
            seconds=round(sum(c.seconds for c in report.checks), 1),
            expert=report.expert,
            executor_node=report.executor_node,
            scope=report.scope,
        )


@dataclass(frozen=True)
class BenchTotals:
    """Correct count, and fast_1: the share of tasks both correct and significantly faster than
    the XLA reference (None without timings, i.e. off a TPU)."""

    tasks: int
    correct: int
    timed: int
    fast: float | None
    with_expert: int = 0  # correct kernels compared with their task's expert
    match_expert: int = 0  # of those, at >= MATCHES_EXPERT of the expert's speed

    def to_json(self) -> dict[str, Any]:
        fast_p = None if self.fast is None else {"p": 1.0, "fast": self.fast}
        return {
            "tasks": self.tasks,
            "correct": self.correct,
            "timed": self.timed,
            "fast_p": fast_p,
            "with_expert": self.with_expert,
            "match_expert": self.match_expert,
        }


def run(args: argparse.Namespace) -> int:
    suite = builtin_suite_dir() if args.suite == "builtin" else Path(args.suite)
    tasks, errors = load_tasks(suite, cache_dir())
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    pairs = _pairs(tasks, args.kernels)
    if not pairs:
        raise TaskError(args.kernels or suite, "no candidate named after a task id")
    results_path = args.results or _default_results(suite, args.kernels)
    done = _read_results(results_path)
    given = {"timeout": args.timeout} if args.timeout is not None else {}
    sanity = args.kernels is None  # references against themselves: no Pallas asked of them
    setup = setup_of(args, settings_from_args(args), require_pallas=not sanity, **given)
    options = setup.options
    keys = [_key(task, kernel, options) for task, kernel in pairs]
    rows = {key: done[key] for key in keys if key in done}
    with _evaluator(setup) as (evaluate, slots), ThreadPoolExecutor(slots) as pool:
        running = {
            pool.submit(evaluate, kernel, task): (key, task, kernel)
            for key, (task, kernel) in zip(keys, pairs)
            if key not in rows
        }
        for finished in as_completed(running):  # appended as each ends: a rerun resumes
            key, task, kernel = running[finished]
            row = rows[key] = BenchRow.of(key, task, kernel, finished.result())
            _append(results_path, row)
            if not args.json:
                print(_format_row(row), flush=True)
    results = [rows[key] for key in keys]
    totals = _totals(results)
    if args.json:
        summary = {
            "results": [r.to_json() for r in results],
            "summary": totals.to_json(),
            "results_file": str(results_path),
        }
        print(json.dumps(summary))
    else:
        print(_format_totals(totals, results_path))
    return 0 if all(r.verdict == ACCEPTED for r in results) and not errors else 1


Evaluate = Callable[[Path, Task], EvalReport]


@contextmanager
def _evaluator(setup: EvaluationSetup) -> Iterator[tuple[Evaluate, int]]:
    """How each candidate is evaluated, and how many at once: by the evaluation service of its
    task, on this machine's harness (shared by the tasks: one at a time) or on the Ray cluster of
    `--ray` (its slots)."""
    executor, traces = setup.executor, cache_dir() / "traces"
    with ExitStack() as stack:
        harness = stack.enter_context(Harness()) if executor.ray is None else None
        if harness is None:
            stack.callback(executor.release)

        def shared() -> Harness:
            assert harness is not None
            return harness

        def evaluate(kernel: Path, task: Task) -> EvalReport:
            on = None if harness is None else shared
            service = EvaluationService(setup, task, traces, harness=on)
            return service.evaluate(KernelSource.read(kernel))

        yield evaluate, executor.slots()


def _pairs(tasks: list[Task], kernels: Path | None) -> list[tuple[Task, Path]]:
    if kernels is None:
        return [(task, task.reference_path) for task in tasks]
    files = {p.stem: p for p in kernels.glob("*.py")}
    pairs = []
    for task in tasks:
        kernel = files.get(task.task_id) or files.get(task.task_id.split("_", 1)[0])
        if kernel is not None:
            pairs.append((task, kernel))
    return pairs


def _key(task: Task, kernel: Path, options: EvalOptions) -> str:
    digest = hashlib.sha256()
    for part in (
        kernel.read_bytes(),
        *(path.read_bytes() for path in task.defining_files),
        f"{options.target}|{options.require_pallas}".encode(),
    ):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:24]


def _default_results(suite: Path, kernels: Path | None) -> Path:
    name = hashlib.sha256(
        f"{suite.resolve()}|{kernels.resolve() if kernels else 'sanity'}".encode()
    ).hexdigest()
    return cache_dir() / "bench" / f"{name[:16]}.jsonl"


def _read_results(path: Path) -> dict[str, BenchRow]:
    rows: dict[str, BenchRow] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                row = BenchRow.from_json(json.loads(line))
            except (ValueError, TypeError, KeyError):
                continue  # a line cut short by a kill, or an older format; that task is redone
            rows[row.key] = row
    return rows


def _append(path: Path, row: BenchRow) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(json.dumps(row.to_json()) + "\n")


def _totals(results: list[BenchRow]) -> BenchTotals:
    timed = [r for r in results if r.timings]
    fast = [r for r in timed if r.verdict == ACCEPTED and r.significantly_faster]
    compared = [r.expert for r in results if r.verdict == ACCEPTED and r.expert is not None]
    return BenchTotals(
        tasks=len(results),
        correct=sum(r.verdict == ACCEPTED for r in results),
        timed=len(timed),
        fast=len(fast) / len(results) if timed else None,
        with_expert=len(compared),
        match_expert=sum(c.matches for c in compared),
    )


def _format_row(row: BenchRow) -> str:
    mark = "✓" if row.verdict == ACCEPTED else "✗"
    why = f"  {row.failed_check}: {row.detail[:110]}" if row.failed_check else ""
    if row.verdict == ACCEPTED and row.scope:
        why = f"  {row.scope}"
    where = "" if row.executor_node == "local" else f"  [{row.executor_node}]"
    return (
        f"{mark} {row.task:<58} {row.verdict:<9} {row.seconds:6.1f}s {_versus_expert(row)}"
        f"{where}{why}"
    )


def _versus_expert(row: BenchRow) -> str:
    """The vs-expert column: the kernel's speed as a share of the expert's, e = estimated."""
    if row.expert is None:
        return f"{'-':>9}"
    return f"{row.expert.ratio:6.2f}x {row.expert.kind[0]}"


def _format_totals(totals: BenchTotals, path: Path) -> str:
    fast = (
        "fast_p: not available: no timings "
        "(no TPU here; CPU interpret-mode times are not kernel times)"
        if totals.fast is None
        else f"fast_1 {totals.fast:.2f} (correct and significantly faster than XLA, measured on "
        f"TPU; {totals.timed} timed)"
    )
    expert = (
        f"; at >= {MATCHES_EXPERT:.2f}x of the expert: {totals.match_expert}/{totals.with_expert} "
        "(vs-expert column: e = estimated by the model, m = measured on a TPU)"
        if totals.with_expert
        else ""
    )
    return f"correct {totals.correct}/{totals.tasks}; {fast}{expert}\nresults: {path}"
