"""Isolation overhead of the evaluation harness.

Side by side, alternating, on one check-sized task (12p RMSNorm, an honest kernel):
  - harness: `Harness.evaluate()` with a warm pool (pre-started tracer and judge processes and a
    running reference process), from request to verdict, production tiles off (the in-process
    path does not run them);
  - in-process: the same work (the candidate traced and its programs carried, trace check, TPU
    lowering, v5e compile, numerics on 3 check seeds and 1 held-out seed, reference outputs,
    comparison) in one process that has already imported jax, timed from the first check to
    the last (a fresh process per sample, so no jit cache is
    shared with an earlier sample).
Median of 5 samples each; goal: harness within 1.5x of in-process. The harness with the
production tiles on (the default verdict) is timed too, as what they add. Writes
benchmarks/results/eval_overhead.md.

    python benchmarks/eval_overhead.py
"""

from __future__ import annotations

import os
import pathlib
import statistics
import subprocess
import sys
import time

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNEL = ROOT / "tests" / "data" / "kernels" / "honest" / "12p_RMSNorm.py"
RESULTS = ROOT / "benchmarks" / "results" / "eval_overhead.md"
SAMPLES = 5

IN_PROCESS = r"""
import contextlib, io, json, sys, tempfile, time
from maxkernel_tui.kernels.evaluation.tracer import candidate as candidate_tracer
from maxkernel_tui.kernels.evaluation.judge import worker as candidate_worker
from maxkernel_tui.kernels.evaluation.reference import worker as reference_worker
from maxkernel_tui.kernels.evaluation.compare import compare_files
from maxkernel_tui.kernels.evaluation.protocol import (
    CandidateRequest, NumericsRun, ReferenceRequest, TraceRequest, event_from_json)
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks
task = find_task("12p", load_tasks(builtin_suite_dir())[0])
runs = [("check", 11), ("check", 12), ("check", 13), ("heldout", 14)]
out = tempfile.mkdtemp()
start = time.perf_counter()
events = io.StringIO()
traced = candidate_tracer.trace_candidate(
    TraceRequest(sys.argv[1], str(task.folder), ["bench", "check", "heldout"], out))
programs = {event.config: event.file for event in traced}
with contextlib.redirect_stdout(events):
    candidate_worker.evaluate_candidate(
        CandidateRequest(sys.argv[1], str(task.folder), "v5e", "bench", runs, out,
                         programs=programs))
reference = reference_worker.reference_outputs(ReferenceRequest(str(task.folder), runs, out))
candidate = [event_from_json(json.loads(line)) for line in events.getvalue().splitlines()]
candidate = [event for event in candidate if isinstance(event, NumericsRun)]
for c, r in zip(candidate, reference.runs):
    assert compare_files(c.files, r.files, task.tolerance(c.config)).ok
print(time.perf_counter() - start)
"""


def in_process_seconds() -> float:
    env = dict(os.environ, JAX_PLATFORMS="cpu", ALLOW_MULTIPLE_LIBTPU_LOAD="1")
    done = subprocess.run(
        [sys.executable, "-c", IN_PROCESS, str(KERNEL)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    task = find_task("12p", load_tasks(builtin_suite_dir())[0])
    harness_samples, in_process_samples, tiles_samples = [], [], []
    same_work, verdict = EvalOptions(seeds=3, tile_blocks=None), EvalOptions(seeds=3)
    with Harness() as harness:
        harness.evaluate(
            KernelSource.read(KERNEL), task, verdict
        )  # warms the reference process and tiles cache
        for _ in range(SAMPLES):
            for options, samples in ((same_work, harness_samples), (verdict, tiles_samples)):
                time.sleep(8)  # let the pool finish pre-starting the next candidate process
                start = time.perf_counter()
                report = harness.evaluate(KernelSource.read(KERNEL), task, options)
                samples.append(time.perf_counter() - start)
                assert report.verdict == "accepted"
            in_process_samples.append(in_process_seconds())
    harness_median = statistics.median(harness_samples)
    in_process_median = statistics.median(in_process_samples)
    lines = [
        "# Evaluation harness overhead (measured)",
        "",
        f"`benchmarks/eval_overhead.py`, {SAMPLES} alternating samples each on a shared "
        f"{os.cpu_count()}-core machine, 12p_RMSNorm with an honest kernel, 3 check seeds + 1 "
        "held-out seed, TPU compile for v5e.",
        "",
        "| path | median (s) | samples (s) |",
        "|---|---:|---|",
        f"| harness, warm pool (request to verdict) | {harness_median:.2f} | "
        f"{', '.join(f'{s:.2f}' for s in harness_samples)} |",
        f"| same checks in one process (jax already imported) | {in_process_median:.2f} | "
        f"{', '.join(f'{s:.2f}' for s in in_process_samples)} |",
        f"| harness with the production tiles (the default verdict) | "
        f"{statistics.median(tiles_samples):.2f} | "
        f"{', '.join(f'{s:.2f}' for s in tiles_samples)} |",
        "",
        f"Ratio harness / in-process: **{harness_median / in_process_median:.2f}x** "
        "(goal: within 1.5x).",
    ]
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
