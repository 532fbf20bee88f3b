"""Which built-in tasks the built-in agent solves: for every task, the kernel it writes, the real
harness's verdict on it, and the performance model's estimate on TPU v5e.

    JAX_PLATFORMS=cpu python benchmarks/builtin_agent_coverage.py [--tasks 12p 41k ...] \
        [--kernels DIR]

Writes benchmarks/results/builtin_agent_coverage.md and replaces the table between the
coverage markers in README.md (with --tasks, prints the table only). Each
kernel is evaluated like `maxkernel-tui eval KERNEL --task T --seeds 2`: static rules, trace,
TPU lowering and v5e compile at bench shapes, numerics on check and heldout shapes. The
roofline share is the model's (maxkernel_tui/kernels/perf/model.py) against XLA's cost of the
reference on v5e; no TPU is involved, so these are estimates, never measurements.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # other processes may hold libtpu

import jax

from maxkernel_tui.agents.builtin import CannotPlan, draft_kernel
from maxkernel_tui.agents.builtin.autotune import estimate_source, reference_cost
from maxkernel_tui.agents.builtin.operand_precision import operand_words
from maxkernel_tui.kernels.evaluation.expert_comparison import from_estimates
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.matmul_rounding import task_tolerance_precision
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks
from maxkernel_tui.kernels.perf.model import Estimate
from maxkernel_tui.kernels.perf.vs_xla import VsXla, XlaBaseline
from maxkernel_tui.kernels.report.checks import VERIFIED_AT_PRODUCTION
from maxkernel_tui.kernels.task import Task

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script or imported
from benchmarks.measured_v5e import JSONL as MEASURED
from benchmarks.measured_v5e import read_records

RESULTS = Path(__file__).resolve().parent / "results" / "builtin_agent_coverage.md"
README = Path(__file__).resolve().parents[1] / "README.md"
README_START = (
    "<!-- builtin-agent-coverage:start (benchmarks/builtin_agent_coverage.py writes this table) -->"
)
README_END = "<!-- builtin-agent-coverage:end -->"
SEEDS = 2
COMMAND = "JAX_PLATFORMS=cpu python benchmarks/builtin_agent_coverage.py"
EXPERT_WORDS = (
    "'est. vs expert' is the expert's estimated time over the kernel's, both on v5e, where the "
    "task has an expert baseline: jax's own Pallas kernel with JAXBench's tuning, made for v6e "
    "(the 1p and 8p tilings need more than v5e's 16 MiB default scoped VMEM, so that expert is "
    "estimated, not compilable, on v5e with default flags)"
)
LAST_RUN_VERDICT = "verdict of the last full run (not re-evaluated: --no-eval)"
PRODUCTION = "production tiles"
NUMERICS_AT_WORDS = (
    "'numerics at' says 'production tiles' where sampled output tiles at production shapes "
    "matched the reference too, 'small shapes' where only the check and heldout shapes were "
    "compared (the full table in benchmarks/results says why the tiles were not run)"
)
SMALL_SHAPES = "small shapes"


@dataclass
class Row:
    task: str
    family: str
    verdict: str  # accepted / rejected / not planned
    reason: str
    estimate_ms: float | None = None
    roofline: float | None = None
    # speedups over XLA as the reference is written and at the MXU passes the tolerance needs
    vs_xla: VsXla | None = None
    seconds: float = 0.0
    precision: str = "-"  # the matmuls' operand precision the agent chose
    vs_expert: float | None = None  # expert time / kernel time, both estimated on v5e
    # where the numerics were checked: at production shapes (sampled tiles) or at small shapes
    # only, with the production tiles' evidence or why they were not run
    checked_at: str = "-"
    tiles: str = ""


def cover(task: Task, harness: Harness | None, kernels: Path, verdicts: dict[str, str]) -> Row:
    """Without a harness (--no-eval), the verdict is the last full run's, from `verdicts`."""
    started = time.monotonic()
    try:
        draft = draft_kernel(task)
    except CannotPlan as error:
        return Row(task.task_id, "-", "not planned", str(error), seconds=time.monotonic() - started)
    kernel = kernels / f"{task.task_id}.py"
    kernel.write_text(draft.source)
    checked_at, tiles = "-", ""
    if harness is None:
        verdict, reason = verdicts.get(task.task_id, "not evaluated"), LAST_RUN_VERDICT
    else:
        report = harness.evaluate(KernelSource.read(kernel), task, EvalOptions(seeds=SEEDS))
        verdict = report.verdict
        reason = f"{report.failure.name}: {report.failure.detail}" if report.failure else ""
        checked_at = PRODUCTION if report.scope == VERIFIED_AT_PRODUCTION else SMALL_SHAPES
        tiles = next((e for e in report.evidence if e.startswith("production tiles")), "")
    # a plan in the reference's own dtypes: what the reference's matmuls need, found the way the
    # profile finds it
    needed = draft.precision.xla if draft.precision else task_tolerance_precision(task)
    model = estimate_source(
        draft.source, task, reference_cost=reference_cost(task), tolerance_precision=needed
    )
    return Row(
        task.task_id,
        draft.family,
        verdict,
        reason,
        model.seconds * 1e3,
        model.roofline_share,
        model.vs_xla,
        time.monotonic() - started,
        (operand_words(draft.precision.per_matmul) or "no matmul")
        if draft.precision
        else "own dtypes",
        vs_expert(task, model),
        checked_at,
        tiles,
    )


def vs_expert(task: Task, kernel: Estimate) -> float | None:
    """The kernel's estimated speed as a share of the task's expert baseline on the same
    target, the figure `eval` reports (evaluation/expert_comparison.py); None without an expert."""
    if task.expert_path is None:
        return None
    expert = estimate_source(task.expert_path.read_text(), task, target=kernel.target)
    return from_estimates(kernel, expert, task.expert_path.name).ratio


def table(rows: list[Row]) -> str:
    lines = [
        "| task | family | verdict | matmul operands | est. v5e time | est. % of roofline | "
        "est. vs XLA@tolerance | est. vs XLA as written | est. vs expert | numerics at | why not |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = [
            row.task,
            row.family,
            row.verdict,
            row.precision,
            _number(row.estimate_ms, "{:.3f} ms"),
            _number(row.roofline and row.roofline * 100, "{:.0f}%"),
            _against(row, XlaBaseline.TOLERANCE),
            _against(row, XlaBaseline.AS_WRITTEN),
            _number(row.vs_expert, "{:.2f}x"),
            row.tiles or row.checked_at,
            row.reason.replace("|", "\\|").replace("\n", " ")[:300],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def readme_table(rows: list[Row], command: str, measured: dict[str, float] | None = None) -> str:
    """The README's short form: verdict, estimated roofline share and speedup over XLA per task,
    the speedup measured on a v5e where this very kernel was measured (`measured`: task -> its
    speedup over XLA at the tolerance's passes), and a column for the expert's ratio (filled
    where an expert kernel is compared)."""
    measured = measured or {}
    accepted = sum(r.verdict == "accepted" for r in rows)
    lines = [
        f"Accepted by `eval`: **{accepted} of {len(rows)}**{_verdict_source(rows)} (`{command}`, "
        f"{datetime.date.today().isoformat()}; roofline shares and speedups are estimates of the "
        "performance model for v5e, not measurements; each speedup says the XLA it compares "
        "with: XLA@N-pass (tolerance) runs the reference at the N bf16 MXU passes the task's "
        "tolerance needs, XLA@N-pass (as written) runs it as written (f32 at XLA's default "
        "precision is one pass); "
        f"{NUMERICS_AT_WORDS}; {EXPERT_WORDS}; {MEASURED_WORDS}).",
        "",
        "| task | family | verdict | numerics at | est. % of v5e roofline | "
        "est. vs XLA@tolerance | meas. vs XLA@tolerance (v5e) | est. vs XLA as written | "
        "est. vs expert |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.task} | {r.family} | {r.verdict} | {r.checked_at} | "
        f"{_number(r.roofline and r.roofline * 100, '{:.0f}%')} | "
        f"{_against(r, XlaBaseline.TOLERANCE)} | {_number(measured.get(r.task), '{:.2f}x')} | "
        f"{_against(r, XlaBaseline.AS_WRITTEN)} | {_number(r.vs_expert, '{:.2f}x')} |"
        for r in rows
    ]
    return "\n".join(lines)


MEASURED_WORDS = (
    "'meas. vs XLA@tolerance' is measured on a TPU v5e by benchmarks/measured_v5e.py (device "
    "trace, medians; benchmarks/results/measured_v5e.md), shown only where the kernel measured "
    "is the one estimated here (its recorded estimate is this row's), '-' elsewhere"
)


def measured_speedups(rows: list[Row], records: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Task -> the measured speedup over XLA at the tolerance's passes, from measured_v5e.py's
    records, for the rows whose kernel is the one measured: the record's estimate of the kernel
    is the row's own (a kernel drafted again since has another)."""
    found = {}
    for row in rows:
        record = records.get(row.task) or {}
        estimated = (record.get("model") or {}).get("kernel_ms")
        speedup = (record.get("vs_xla_tolerance") or {}).get("ratio")
        if speedup and estimated and row.estimate_ms and abs(estimated - row.estimate_ms) < 1e-9:
            found[row.task] = float(speedup)
    return found


def _verdict_source(rows: list[Row]) -> str:
    carried = any(r.reason == LAST_RUN_VERDICT for r in rows)
    return (
        " (verdicts of the last full run; this run drafted and estimated only)" if carried else ""
    )


def _against(row: Row, baseline: XlaBaseline) -> str:
    """`1.02x (3-pass)`: the row's speedup over that XLA and its MXU passes; `-` without."""
    found = row.vs_xla.figure(baseline) if row.vs_xla else None
    if found is None or found.speedup is None:
        return "-"
    return f"{found.speedup:.2f}x ({found.passes}-pass)"


def readme_verdicts(text: str) -> dict[str, str]:
    """Task id -> verdict, from the README table between the coverage markers."""
    start, end = text.index(README_START), text.index(README_END)
    cells = [line.split("|") for line in text[start:end].splitlines() if line.startswith("| ")]
    return {row[1].strip(): row[3].strip() for row in cells if len(row) > 4}


def replace_between_markers(text: str, replacement: str) -> str:
    """`text` with what lies between the README's coverage markers replaced."""
    start, end = text.index(README_START) + len(README_START), text.index(README_END)
    return text[:start] + "\n" + replacement + "\n" + text[end:]


def report(rows: list[Row], command: str, seconds: float) -> str:
    accepted = sum(r.verdict == "accepted" for r in rows)
    planned = sum(r.verdict != "not planned" for r in rows)
    return "\n".join(
        [
            "# Built-in agent coverage of the built-in suite",
            "",
            f"Generated {datetime.date.today().isoformat()} by `{command}` in {seconds / 60:.1f} "
            "min on a CPU-only "
            f"machine (jax {jax.__version__}).",
            "",
            f"**Accepted: {accepted}/{len(rows)}**{_verdict_source(rows)} (planned {planned}; "
            "every planned kernel "
            "evaluated by the real "
            f"harness with {SEEDS} seeds: static, trace, TPU lowering and v5e compile at bench "
            "shapes, numerics on "
            "check and heldout shapes in TPU interpret mode, and on sampled output tiles at "
            f"production shapes where affordable; {NUMERICS_AT_WORDS}).",
            "",
            "Times, roofline shares and speedups are estimates of the performance model for TPU "
            "v5e at bench "
            "shapes (roofline: the reference's XLA flops and every input read and output written "
            "once); nothing was measured on a TPU here (benchmarks/results/measured_v5e.md has "
            "the figures of a v5e). The agent feeds the MXU bf16 operands with f32 accumulation "
            "wherever the reference, evaluated with them, stays within the tolerance on check, "
            "heldout and edge shapes (agents/builtin/precision.py); elsewhere f32 operands in "
            "three bf16 passes (each split into high and low bf16 parts), or at HIGHEST. Each "
            "speedup is shown against two XLAs: at the MXU passes the task's tolerance needs "
            "(XLA@tolerance, the fair baseline) and running the reference as written "
            "(XLA as written: f32 at XLA's default precision is one bf16 pass). "
            "XLA's time is the model's (perf/xla_model.py), dispatch included. "
            '"-" where the reference does not compile for v5e (no XLA cost to compare with). '
            f"Column {EXPERT_WORDS}.",
            "",
            table(rows),
            "",
        ]
    )


def _number(value: float | None, template: str) -> str:
    return template.format(value) if value is not None else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks", nargs="*", help="task ids or numbers (default: every built-in task)"
    )
    parser.add_argument("--kernels", type=Path, help="keep the generated kernels in this folder")
    parser.add_argument(
        "--rows", type=Path, help="keep each task's row as JSON in this folder (for --from-rows)"
    )
    parser.add_argument(
        "--from-rows",
        type=Path,
        help="write the tables from the rows kept in this folder by earlier runs (no drafting)",
    )
    parser.add_argument(
        "--no-eval",
        action="store_true",
        help="estimates only; verdicts are the README table's (the last full run)",
    )
    args = parser.parse_args()
    tasks, _ = load_tasks(builtin_suite_dir())
    if args.tasks:
        tasks = [find_task(name, tasks) for name in args.tasks]
    kernels = args.kernels or Path(tempfile.mkdtemp(prefix="builtin-agent-"))
    kernels.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if args.from_rows:
        kept = {r.task: r for r in map(_read_row, sorted(args.from_rows.glob("*.json")))}
        missing = [t.task_id for t in tasks if t.task_id not in kept]
        if missing:
            raise SystemExit(f"no row kept for {', '.join(missing)}")
        _write(
            [kept[t.task_id] for t in tasks],
            f"{COMMAND} --no-eval"
            if any(r.reason == LAST_RUN_VERDICT for r in kept.values())
            else COMMAND,
            sum(r.seconds for r in kept.values()),
        )
        return
    rows = []
    verdicts = readme_verdicts(README.read_text())
    with contextlib.ExitStack() as stack:
        harness = None if args.no_eval else stack.enter_context(Harness())
        for task in tasks:
            row = cover(task, harness, kernels, verdicts)
            rows.append(row)
            if args.rows:
                args.rows.mkdir(parents=True, exist_ok=True)
                (args.rows / f"{row.task}.json").write_text(json.dumps(dataclasses.asdict(row)))
            print(
                f"{row.task:55s} {row.verdict:12s} {row.seconds:5.1f}s {row.family:40s} "
                f"{row.vs_xla.short() if row.vs_xla else '-'} {row.precision} "
                f"{row.reason[:150]}",
                flush=True,
            )
    if args.tasks:
        print(table(rows))
        return
    _write(rows, COMMAND + (" --no-eval" if args.no_eval else ""), time.monotonic() - started)


def _read_row(path: Path) -> Row:
    fields = json.loads(path.read_text())
    both = fields.pop("vs_xla", None)
    return Row(**fields, vs_xla=None if both is None else VsXla.from_json(both))


def _write(rows: list[Row], command: str, seconds: float) -> None:
    RESULTS.write_text(report(rows, command, seconds))
    measured = measured_speedups(rows, read_records(MEASURED))
    README.write_text(
        replace_between_markers(README.read_text(), readme_table(rows, command, measured))
    )
    print(
        f"accepted {sum(r.verdict == 'accepted' for r in rows)}/{len(rows)}; wrote {RESULTS} and "
        "the README table"
    )


if __name__ == "__main__":
    main()
