"""The built-in agent's kernels measured on a real TPU v5e against XLA, beside the performance
model's estimates of the same figures, so the table says where the model is right and where off.

    # on the TPU machine: measure every kernel in KERNELS (stem = task id), one process at a time
    python benchmarks/measured_v5e.py measure --kernels DIR --rows DIR --out FILE.jsonl \
        [--tasks 41k 12p ...] [--repeats 20] [--deadline 480] [--task-timeout 180]
    # anywhere, no jax: the markdown table from the raw figures
    python benchmarks/measured_v5e.py table [--jsonl FILE.jsonl] [--md FILE.md]
    # on a CPU, after the model changed: the measured kernels' estimates again
    JAX_PLATFORMS=cpu python benchmarks/measured_v5e.py reestimate --kernels DIR --date DATE

KERNELS holds one kernel file per task, as benchmarks/builtin_agent_coverage.py writes them;
ROWS the same script's per-task rows (JSON: the model's `estimate_ms` and `vs_xla` speedups, all
estimated for v5e). Per task, at its production (bench) shapes, three programs are timed
interleaved on two rotating input sets (evaluation/timing/clock.py: device time from a profiler
trace on a TPU, else the wall clock, and each figure says which): the kernel compiled for the TPU
(never interpret mode), the reference jitted as written, and the reference at the MXU passes the
task's tolerance needs (the row's `vs_xla.tolerance.passes`, which the coverage script found with
matmul_rounding.task_tolerance_precision; traced under jax.default_matmul_precision as
benchmarks/builtin_conv_timing.py does; where it equals the as-written precision the program is
the same and is timed once). The kernel's outputs are compared on the device with the as-written
reference's and with the reference at Precision.HIGHEST (f32, what the judge compares with on a
CPU), the max |Δ| and the share of the tolerance recorded, not judged: the second says whether
the kernel meets the task's tolerance on the TPU itself. The model's XLA times are its kernel time
times its speedups.

Each task runs in a worker process, one at a time (one program may hold the chip); a task that
raises is recorded with its error's first line, a worker that dies or stalls is replaced and the
task recorded as crashed or timed out, and every result is appended to the JSONL file at once,
so a second call resumes where the first stopped.

UNSANDBOXED: the kernel files are imported and run directly, outside the project's sandbox
(kernels/sandbox). This is meant for the project's own built-in agent's kernels only, on a
borrowed benchmark machine; never point it at kernels from elsewhere (use `maxkernel-tui eval`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
JSONL = RESULTS / "measured_v5e.jsonl"
TABLE = RESULTS / "measured_v5e.md"
INPUT_SETS = 2  # rotated between calls, as the timing worker does
# jax.default_matmul_precision's name for XLA at each number of bf16 MXU passes
PRECISION_NAMES = {1: "default", 3: "high", 6: "highest"}
ESTIMATED = "estimated"
Record = dict[str, Any]


# ---- pure: the model's figures, the records, the table (no jax) ----


def model_figures(row: Record) -> Record:
    """The model's estimates of one task from its coverage row: the kernel's time, and XLA's
    time as written and at the tolerance's precision (kernel time × the model's speedup)."""
    kernel_ms = row.get("estimate_ms")
    figures: Record = {
        "family": row.get("family", "-"),
        "verdict": row.get("verdict", "-"),
        "kernel_ms": kernel_ms,
        "basis": ESTIMATED,
        "where": "v5e",
    }
    vs_xla = row.get("vs_xla") or {}
    for key, name in (("as_written", "written"), ("tolerance", "tolerance")):
        baseline = vs_xla.get(key) or {}
        ratio = baseline.get("speedup")
        figures[f"{name}_passes"] = baseline.get("passes")
        figures[f"vs_xla_{name}"] = ratio
        figures[f"xla_{name}_ms"] = kernel_ms * ratio if kernel_ms and ratio else None
        if baseline.get("basis"):
            figures["basis"] = baseline["basis"]
    return figures


def task_number(task_id: str) -> tuple[int, str]:
    """Tasks in the suite's order: 1p, 2p, ... 50k."""
    found = re.match(r"(\d+)", task_id)
    return (int(found.group(1)) if found else 10**6, task_id)


def read_records(path: Path) -> dict[str, Record]:
    """The last record of each task in a JSONL file (a later run replaces an earlier one)."""
    records: dict[str, Record] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                records[record["task"]] = record
    return records


def geomean(values: Iterable[float]) -> float | None:
    kept = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(statistics.fmean(math.log(v) for v in kept)) if kept else None


def ratio(measured: float | None, estimated: float | None) -> float | None:
    return measured / estimated if measured and estimated else None


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}×"


def _measured(record: Record) -> bool:
    return record.get("kernel_ms") is not None


def table(records: Sequence[Record]) -> str:
    """The markdown: per task, the model's figures beside the measured ones; per family, the
    geometric mean of measured over estimated; the failures with their first line."""
    ordered = sorted(records, key=lambda r: task_number(r["task"]))
    measured = [r for r in ordered if _measured(r)]
    clocks = sorted({r.get("clock", "?") for r in measured})
    device = sorted({r.get("device_kind", "?") for r in measured})
    lines = [
        "# Built-in agent kernels: measured on TPU v5e vs the performance model",
        "",
        "Written by `benchmarks/measured_v5e.py` (its docstring says how each figure is made). "
        f"Device: {', '.join(device) or '-'}; clock: {', '.join(clocks) or '-'} (the measured "
        "figures are medians of interleaved runs at the task's bench shapes); every 'est.' "
        "figure is the model's estimate for v5e (benchmarks/builtin_agent_coverage.py), not a "
        "measurement. XLA@tol is the reference at the MXU passes the task's tolerance needs "
        "(passes in brackets; 'same' where that is the as-written program). Speedups are XLA "
        "time over kernel time. 'meas/est' is measured kernel time over estimated: above 1 the "
        "model is optimistic. max|Δ| is the kernel against the as-written reference on the TPU, "
        "and against the reference at Precision.HIGHEST there (f32: what the tolerance is "
        "measured from; recorded, not judged; 'tol' is the share of the task's tolerance the "
        "worst element used; '-' where it was not taken).",
        "",
    ]
    lines += _headline(ordered, measured)
    lines += [
        "",
        "## Per task",
        "",
        "| task | est. kernel ms | meas. kernel ms | meas/est kernel | est. XLA ms | meas. XLA ms "
        "| est. XLA@tol ms | meas. XLA@tol ms | est. vs XLA | meas. vs XLA | est. vs XLA@tol "
        "| meas. vs XLA@tol | max abs diff (tol) | vs f32 reference (tol) | clock |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for record in ordered:
        lines.append(_task_line(record))
    lines += ["", "## Per family", ""]
    lines += _family_lines(measured)
    failed = [r for r in ordered if not _measured(r)]
    if failed:
        lines += ["", "## Not measured", "", "| task | why (first line) |", "|---|---|"]
        lines += [f"| {r['task']} | {_cell(r.get('error', '-'))} |" for r in failed]
    return "\n".join(lines) + "\n"


def _headline(ordered: Sequence[Record], measured: Sequence[Record]) -> list[str]:
    model = [r.get("model") or {} for r in measured]
    kernel = geomean(
        ratio(r["kernel_ms"], m.get("kernel_ms")) or 0 for r, m in zip(measured, model)
    )
    written = geomean(
        ratio(r.get("xla_written_ms"), m.get("xla_written_ms")) or 0
        for r, m in zip(measured, model)
    )
    tolerance = geomean(
        ratio(r.get("xla_tolerance_ms"), m.get("xla_tolerance_ms")) or 0
        for r, m in zip(measured, model)
    )
    meas_vs = geomean((r.get("vs_xla_written") or {}).get("ratio") or 0 for r in measured)
    est_vs = geomean(m.get("vs_xla_written") or 0 for m in model)
    meas_tol = geomean((r.get("vs_xla_tolerance") or {}).get("ratio") or 0 for r in measured)
    est_tol = geomean(m.get("vs_xla_tolerance") or 0 for m in model)
    return [
        f"Measured {len(measured)} of {len(ordered)} tasks. Geometric means over them: "
        f"kernel time measured/estimated {_x(kernel)}, XLA as written measured/estimated "
        f"{_x(written)}, XLA@tol measured/estimated {_x(tolerance)}; speedup over XLA as "
        f"written est. {_x(est_vs)} vs measured {_x(meas_vs)}, over XLA@tol est. {_x(est_tol)} "
        f"vs measured {_x(meas_tol)}.",
    ]


def _task_line(record: Record) -> str:
    model = record.get("model") or {}
    if not _measured(record):
        cells = [record["task"], _ms(model.get("kernel_ms"))] + ["-"] * 12
        cells.append(f"not measured: {_cell(record.get('error', '-'))[:80]}")
        return "| " + " | ".join(cells) + " |"
    written = record.get("vs_xla_written") or {}
    tolerance = record.get("vs_xla_tolerance") or {}
    passes = record.get("tolerance_passes")
    tol_ms = _ms(record.get("xla_tolerance_ms"))
    if record.get("tolerance_same_program"):
        tol_ms += " (same)"
    elif passes:
        tol_ms += f" ({passes} passes)"
    diff = _worst(record.get("numerics") or []) or _cell(record.get("numerics_error", "-"))
    exact = _worst(record.get("numerics_exact") or []) or "-"  # records before it was taken
    cells = [
        record["task"],
        _ms(model.get("kernel_ms")),
        _ms(record["kernel_ms"]),
        _x(ratio(record["kernel_ms"], model.get("kernel_ms"))),
        _ms(model.get("xla_written_ms")),
        _ms(record.get("xla_written_ms")),
        _ms(model.get("xla_tolerance_ms")),
        tol_ms,
        _x(model.get("vs_xla_written")),
        _x(written.get("ratio")),
        _x(model.get("vs_xla_tolerance")),
        _x(tolerance.get("ratio")),
        diff,
        exact,
        _clock(record),
    ]
    return "| " + " | ".join(cells) + " |"


def _worst(differences: Sequence[Record]) -> str:
    """The largest share of the tolerance among the outputs, with its max |Δ|; '' for none."""
    worst = max(differences, key=lambda d: d.get("tolerance_used", 0), default=None)
    return f"{worst['max_abs']:.2e} ({worst['tolerance_used']:.0%})" if worst else ""


def _clock(record: Record) -> str:
    """The clock, flagged where the figure is no TPU timing (a CPU plumbing check)."""
    clock = str(record.get("clock", "?"))
    if record.get("interpret") or record.get("platform") != "tpu":
        clock += f" on {record.get('platform', '?')}, interpret mode: not a TPU timing"
    return clock


def _family_lines(measured: Sequence[Record]) -> list[str]:
    families: dict[str, list[Record]] = defaultdict(list)
    for record in measured:
        families[(record.get("model") or {}).get("family", "-")].append(record)
    lines = [
        "| family | tasks | geomean meas/est kernel | geomean meas/est XLA as written "
        "| geomean meas. vs XLA@tol | geomean est. vs XLA@tol |",
        "|---|---|---|---|---|---|",
    ]

    def off(item: tuple[str, list[Record]]) -> float:
        found = _family_geomean(item[1])
        return -abs(math.log(found)) if found else 0.0

    for family, members in sorted(families.items(), key=off):
        written = geomean(
            ratio(r.get("xla_written_ms"), (r.get("model") or {}).get("xla_written_ms")) or 0
            for r in members
        )
        meas_tol = geomean((r.get("vs_xla_tolerance") or {}).get("ratio") or 0 for r in members)
        est_tol = geomean((r.get("model") or {}).get("vs_xla_tolerance") or 0 for r in members)
        lines.append(
            f"| {family} | {len(members)} | {_x(_family_geomean(members))} | {_x(written)} "
            f"| {_x(meas_tol)} | {_x(est_tol)} |"
        )
    return lines


def _family_geomean(members: Sequence[Record]) -> float | None:
    return geomean(
        ratio(r["kernel_ms"], (r.get("model") or {}).get("kernel_ms")) or 0 for r in members
    )


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def first_line(error: BaseException | str) -> str:
    text = str(error).strip()
    line = text.splitlines()[0] if text else ""
    name = type(error).__name__ if isinstance(error, BaseException) else ""
    return (f"{name}: {line}" if name else line)[:300]


# ---- the driver: one worker process at a time, resumable (no jax) ----


def drive(args: argparse.Namespace) -> None:
    out = Path(args.out)
    kernels = Path(args.kernels)
    wanted = sorted((p.stem for p in kernels.glob("*.py")), key=task_number)
    if args.tasks:
        wanted = [t for t in wanted if any(t == a or t.split("_", 1)[0] == a for a in args.tasks)]
    done = set(read_records(out))
    remaining = [t for t in wanted if t not in done]
    started = time.monotonic()
    progress = out.with_suffix(".progress")
    while remaining and time.monotonic() - started < args.deadline:
        left = args.deadline - (time.monotonic() - started)
        progress.write_text("", encoding="utf-8")
        log = out.with_suffix(".worker.log")
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "worker",
            "--kernels",
            str(kernels),
            "--rows",
            args.rows,
            "--out",
            str(out),
            "--progress",
            str(progress),
            "--repeats",
            str(args.repeats),
            "--warmups",
            str(args.warmups),
            "--deadline",
            str(left),
            "--tasks",
            *remaining,
        ]
        if args.interpret:
            command.append("--interpret")
        if args.config:
            command += ["--config", args.config]
        offset = log.stat().st_size if log.exists() else 0
        with log.open("ab") as sink:
            worker = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
            code = _watch(worker, progress, args.task_timeout)
        current = progress.read_text(encoding="utf-8").strip()
        done = set(read_records(out))
        if current and current not in done:  # the worker died or stalled on it
            why = (
                f"timed out: no result in {args.task_timeout:.0f} s"
                if code is None
                else f"worker exited with {code}: {_last_error(log, offset)}"
            )
            _append(out, {"task": current, "error": why, "model": _model(args.rows, current)})
            print(f"{current}: {why}", flush=True)
        remaining = [t for t in remaining if t not in set(read_records(out))]
        if code == 0:
            break  # the worker stopped at its deadline
        time.sleep(5)  # the chip can refuse a program started just after another ended
    print(f"{len(read_records(out))} task(s) recorded; {len(remaining)} left", flush=True)


def _watch(worker: subprocess.Popen[bytes], progress: Path, timeout: float) -> int | None:
    """The worker's exit code; None after killing it when a task stalled past `timeout`."""
    last, since = progress.read_text(encoding="utf-8"), time.monotonic()
    while worker.poll() is None:
        time.sleep(1)
        now = progress.read_text(encoding="utf-8")
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since > timeout:
            worker.kill()
            worker.wait()
            return None
    return worker.returncode


def _last_error(log: Path, offset: int) -> str:
    """The last line a worker logged after `offset` that names an error, else its last line
    (its result lines, which start with '{', left out)."""
    with log.open("rb") as source:
        source.seek(offset)
        text = source.read().decode("utf-8", errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()[:1] not in ("", "{")]
    errors = [line for line in lines if re.search(r"error|abort|fatal|check failed", line, re.I)]
    return (errors or lines or ["no output"])[-1][:300]


def _append(out: Path, record: Record) -> None:
    with out.open("a", encoding="utf-8") as sink:
        sink.write(json.dumps(record) + "\n")
        sink.flush()
        os.fsync(sink.fileno())


def _model(rows: str, task_id: str) -> Record:
    path = Path(rows) / f"{task_id}.json"
    return model_figures(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else {}


# ---- the worker: imports jax and the kernels (runs on the TPU machine) ----


def work(args: argparse.Namespace) -> None:
    from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks

    tasks, _ = load_tasks(builtin_suite_dir())
    started = time.monotonic()
    out, progress = Path(args.out), Path(args.progress)
    for task_id in args.tasks:
        if time.monotonic() - started > args.deadline:
            return
        progress.write_text(task_id, encoding="utf-8")
        model = _model(args.rows, task_id)
        began = time.monotonic()
        try:
            record = measure(
                find_task(task_id, tasks), Path(args.kernels) / f"{task_id}.py", model, args
            )
        except Exception as error:  # recorded; the next task goes on
            record = {"task": task_id, "error": first_line(error)}
        record.update(task=task_id, model=model, seconds=round(time.monotonic() - began, 1))
        _append(out, record)
        print(json.dumps({k: record.get(k) for k in ("task", "kernel_ms", "error")}), flush=True)
        _release()


def reestimate(args: argparse.Namespace) -> None:
    """The model's figures of every measured kernel again, with the model as it is now: each
    record whose kernel file is in `--kernels` is appended again with its `model` replaced (the
    measured figures untouched), so the table compares the measurements with today's model.
    The kernel files must be the ones measured; each record names the file its figures came
    from (`model.kernel_file`)."""
    from maxkernel_tui.agents.builtin.autotune import estimate_source, reference_cost
    from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks
    from maxkernel_tui.kernels.perf.xla_model import XLA_PRECISIONS

    tasks, _ = load_tasks(builtin_suite_dir())
    out = Path(args.out)
    for task_id, record in sorted(read_records(out).items(), key=lambda i: task_number(i[0])):
        kernel = Path(args.kernels) / f"{task_id}.py"
        if not _measured(record) or not kernel.exists():
            continue
        task = find_task(task_id, tasks)
        passes = record.get("tolerance_passes") or 1
        estimate = estimate_source(
            kernel.read_text(encoding="utf-8"),
            task,
            reference_cost=reference_cost(task),
            tolerance_precision=XLA_PRECISIONS[passes],
        )
        earlier = record.get("model") or {}
        row = {
            "family": earlier.get("family", "-"),
            "verdict": earlier.get("verdict", "-"),
            "estimate_ms": estimate.seconds * 1e3,
            "vs_xla": estimate.vs_xla.to_json() if estimate.vs_xla else None,
        }
        model = {**model_figures(row), "kernel_file": kernel.name, "reestimated": args.date}
        _append(out, {**record, "model": model})
        print(f"{task_id}: {earlier.get('kernel_ms')} -> {model['kernel_ms']:.3f} ms", flush=True)


def _release() -> None:
    import gc

    import jax

    jax.clear_caches()
    gc.collect()


def measure(task: Any, kernel_path: Path, model: Record, args: argparse.Namespace) -> Record:
    """The three programs of one task, compiled for the device, checked and timed."""
    import contextlib
    import dataclasses

    import jax
    import numpy as np
    from jax.experimental.pallas import tpu as pltpu

    from maxkernel_tui.kernels import reference_runtime as runtime
    from maxkernel_tui.kernels.evaluation.compare import compare_arrays
    from maxkernel_tui.kernels.evaluation.matmul_rounding import (
        task_tolerance_precision,
        written_precision,
    )
    from maxkernel_tui.kernels.evaluation.protocol import WALL_CLOCK
    from maxkernel_tui.kernels.evaluation.timing.clock import (
        choose_clock,
        named_jit,
        time_interleaved,
    )
    from maxkernel_tui.kernels.evaluation.timing.stats import speedup

    config = args.config or task.configs[0]
    reference = runtime.load_reference(task)
    kernel = runtime.load_candidate(task, reference, kernel_path)
    specs, static = runtime.input_specs(task, reference, config)
    inputs = [runtime.make_inputs(task, reference, config, seed)[0] for seed in range(INPUT_SETS)]
    device = jax.devices()[0]

    def as_written(*dynamic: Any) -> Any:
        return reference.computation(*dynamic, *static)

    def candidate(*dynamic: Any) -> Any:
        return kernel.computation(*dynamic, *static)

    written = written_precision(jax.make_jaxpr(as_written)(*specs).jaxpr).passes
    passes = model.get("tolerance_passes")
    if passes is None:
        needed = task_tolerance_precision(task)
        passes = needed.passes if needed else None
    precision = PRECISION_NAMES.get(passes) if passes else None

    def at_tolerance(*dynamic: Any) -> Any:
        with jax.default_matmul_precision(precision):
            return reference.computation(*dynamic, *static)

    programs = {
        "kernel": named_jit("kernel", candidate),
        "xla_written": named_jit("xla_written", as_written),
    }
    same = passes == written
    record: Record = {
        "config": config,
        "device_kind": device.device_kind,
        "platform": device.platform,
        "written_passes": written,
        "tolerance_passes": passes,
        "tolerance_same_program": same,
        "interpret": bool(args.interpret),
    }
    if precision and not same:
        programs["xla_tolerance"] = named_jit("xla_tolerance", at_tolerance)
        stated = written_precision(jax.make_jaxpr(at_tolerance)(*specs).jaxpr)
        record["tolerance_program_passes"] = stated.passes
    interpret = pltpu.force_tpu_interpret_mode() if args.interpret else contextlib.nullcontext()
    with interpret:
        compile_s = {}
        outputs = {}
        for name in ("kernel", "xla_written"):  # first calls: compile and run
            began = time.monotonic()
            outputs[name] = jax.tree.leaves(jax.block_until_ready(programs[name](*inputs[0])))
            compile_s[name] = round(time.monotonic() - began, 2)
        record["first_call_s"] = compile_s
        tolerance = task.tolerance(config)
        numerics = [
            _difference(compare_arrays(np.asarray(got), np.asarray(want), tolerance))
            for got, want in zip(outputs["kernel"], outputs["xla_written"], strict=False)
        ]
        if len(outputs["kernel"]) != len(outputs["xla_written"]):
            record["numerics_error"] = (
                f"{len(outputs['kernel'])} outputs, the reference has {len(outputs['xla_written'])}"
            )
        record["numerics"] = numerics
        del outputs["xla_written"]  # room in HBM for the f32 reference
        # the reference in f32 on the device: what the task's tolerance is measured from. A
        # reference whose XLA runs a Pallas kernel of its own (attention may) can refuse
        # HIGHEST on bf16 operands ("Bad lhs type"): recorded, and the timing goes on.
        try:
            with jax.default_matmul_precision("highest"):
                exact = jax.tree.leaves(jax.block_until_ready(jax.jit(as_written)(*inputs[0])))
            record["numerics_exact"] = [
                _difference(compare_arrays(np.asarray(got), np.asarray(want), tolerance))
                for got, want in zip(outputs["kernel"], exact, strict=False)
            ]
            del exact
        except Exception as error:
            record["numerics_exact_error"] = first_line(error)
        del outputs
        clock = choose_clock(device.platform)
        try:
            timed = time_interleaved(programs, inputs, args.repeats, args.warmups, clock)
        except Exception as error:  # the profiler itself failed: the wall clock, said so
            if clock == WALL_CLOCK:
                raise
            timed = time_interleaved(programs, inputs, args.repeats, args.warmups, WALL_CLOCK)
            timed = dataclasses.replace(timed, note=f"the profiler failed: {first_line(error)}")
    samples = timed.samples
    record.update(
        clock=timed.clock,
        clock_note=timed.note,
        repeats=args.repeats,
        basis="measured",
        samples_ms={k: [round(s * 1e3, 5) for s in v] for k, v in samples.items()},
    )
    for name in programs:
        record[f"{name}_ms"] = statistics.median(samples[name]) * 1e3
    baselines: dict[str, str | None] = {
        "written": "xla_written",
        "tolerance": "xla_tolerance" if not same else None,
    }
    if same:
        record["xla_tolerance_ms"] = record["xla_written_ms"]
    for key, baseline in baselines.items():
        program = baseline or "xla_written"
        if program in samples:
            found_ratio = speedup(samples[program], samples["kernel"])
            record[f"vs_xla_{key}"] = {
                "ratio": found_ratio.ratio,
                "low": found_ratio.low,
                "high": found_ratio.high,
            }
    return record


def _difference(found: Any) -> Record:
    return {"max_abs": found.max_abs, "tolerance_used": found.tolerance_used, "within": found.ok}


# ---- command line ----


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    for verb in ("measure", "worker"):
        sub = verbs.add_parser(verb)
        sub.add_argument("--kernels", required=True)
        sub.add_argument("--rows", required=True)
        sub.add_argument("--out", default=str(JSONL))
        sub.add_argument("--tasks", nargs="*", default=[])
        sub.add_argument("--repeats", type=int, default=20)
        sub.add_argument("--warmups", type=int, default=2)
        sub.add_argument("--deadline", type=float, default=480.0, help="seconds; no new task after")
        sub.add_argument("--config", default="", help="default: the task's bench configuration")
        sub.add_argument(
            "--interpret", action="store_true", help="plumbing check on a CPU only: not a timing"
        )
        if verb == "measure":
            sub.add_argument("--task-timeout", type=float, default=180.0)
        else:
            sub.add_argument("--progress", required=True)
    again = verbs.add_parser("reestimate")
    again.add_argument("--kernels", required=True)
    again.add_argument("--out", default=str(JSONL))
    again.add_argument("--date", required=True, help="when: written into each record")
    tables = verbs.add_parser("table")
    tables.add_argument("--jsonl", default=str(JSONL))
    tables.add_argument("--md", default=str(TABLE))
    args = parser.parse_args(argv)
    if args.verb == "measure":
        drive(args)
    elif args.verb == "worker":
        work(args)
    elif args.verb == "reestimate":
        reestimate(args)
    else:
        text = table(list(read_records(Path(args.jsonl)).values()))
        Path(args.md).write_text(text, encoding="utf-8")
        print(text)


if __name__ == "__main__":
    main()
