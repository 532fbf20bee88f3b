"""Evaluations per minute: the local executor against Ray with one and with two local nodes, side
by side in one run on the same machine, the same task and kernel (1r_Scaled_Add, check shapes,
an honest Pallas kernel, 2 seeds), measured.

- local: `Harness.evaluate` one at a time, as the local executor (`EvaluationService`) runs them;
- ray, N nodes: a cluster of N one-CPU nodes on 127.0.0.1 started with Ray's CLI (token auth),
  driven by a child process through `RayDispatcher` with as many evaluations in flight as the
  cluster has slots.
Each executor first does one warm-up evaluation (its workers import jax), not counted; then
EVALS evaluations are timed from the first submission to the last verdict. Cluster start-up is
reported apart. Writes benchmarks/results/ray_throughput.md.

    python benchmarks/ray_throughput.py [EVALS]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.executors.cli_cluster import CliCluster
from maxkernel_tui.kernels.loader import load_task

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "tests" / "data" / "ray_tasks" / "1r_Scaled_Add"
KERNEL = ROOT / "tests" / "data" / "ray_kernels" / "1r_Scaled_Add.py"
RESULTS = ROOT / "benchmarks" / "results" / "ray_throughput.md"
OPTIONS = EvalOptions(seeds=2)

DRIVER = r"""
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from maxkernel_tui.kernels.evaluation.harness import EvalOptions
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.executors import ray_cluster
from maxkernel_tui.kernels.executors.jobs import EvalJob, TaskFiles
from maxkernel_tui.kernels.executors.ray_dispatch import RayDispatcher
from maxkernel_tui.kernels.loader import load_task
address, task_dir, kernel, evals = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
started = time.monotonic()
dispatcher = RayDispatcher(ray_cluster.connect(address))
job = EvalJob(TaskFiles.of(load_task(task_dir)), KernelSource.read(kernel), EvalOptions(seeds=2))
with ThreadPoolExecutor(dispatcher.slots) as pool:  # one warm-up per node
    warm = list(pool.map(dispatcher.evaluate, [job] * dispatcher.slots))
ready = time.monotonic()
with ThreadPoolExecutor(dispatcher.slots) as pool:
    answers = list(pool.map(dispatcher.evaluate, [job] * evals))
done = time.monotonic()
print(json.dumps({"seconds": done - ready, "warm_up": ready - started, "slots": dispatcher.slots,
                  "verdicts": [a.report.verdict for a in warm + answers],
                  "nodes": sorted({a.node for a in answers})}))
dispatcher.close()
"""


def local(evals: int) -> dict:
    task = load_task(TASK)
    started = time.monotonic()
    with Harness() as harness:
        warm = harness.evaluate(KernelSource.read(KERNEL), task, OPTIONS)
        ready = time.monotonic()
        reports = [harness.evaluate(KernelSource.read(KERNEL), task, OPTIONS) for _ in range(evals)]
        done = time.monotonic()
    verdicts = [r.verdict for r in [warm, *reports]]
    return {"seconds": done - ready, "warm_up": ready - started, "slots": 1, "verdicts": verdicts}


def on_ray(nodes: int, evals: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="mkbench-", dir="/tmp"))
    base = {k: v for k, v in os.environ.items() if "KEY" not in k and "TOKEN" not in k}
    cluster = CliCluster(root, nodes=nodes)
    started = time.monotonic()
    try:
        cluster.start(base)
        up = time.monotonic() - started
        child = subprocess.run(
            [sys.executable, "-c", DRIVER, cluster.address, str(TASK), str(KERNEL), str(evals)],
            env=dict(base, **cluster.driver_env()),
            capture_output=True,
            text=True,
            check=True,
            timeout=3600,
        )
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    return dict(json.loads(child.stdout.strip().splitlines()[-1]), cluster_start=up)


def main() -> None:
    evals = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    runs = {
        "local executor (worker pool)": local(evals),
        "Ray, 1 local node": on_ray(1, evals),
        "Ray, 2 local nodes": on_ray(2, evals),
    }
    lines = [
        "# Evaluations per minute: local executor vs Ray (measured)",
        "",
        f"`python benchmarks/ray_throughput.py {evals}` on this machine ({os.cpu_count()} CPU "
        f"cores, load average {os.getloadavg()[0]:.1f} at the end); task 1r_Scaled_Add, check "
        f"shapes, 2 seeds + held-out, an honest kernel; {evals} timed evaluations per executor "
        "after one warm-up per slot.",
        "",
        "| executor | slots | evaluations/min | timed s | warm-up s | cluster start s | verdicts |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, run in runs.items():
        rate = 60.0 * evals / run["seconds"]
        start = f"{run['cluster_start']:.1f}" if "cluster_start" in run else "-"
        accepted = sum(v == "accepted" for v in run["verdicts"])
        lines.append(
            f"| {name} | {run['slots']} | {rate:.2f} | {run['seconds']:.1f} | "
            f"{run['warm_up']:.1f} | {start} | {accepted}/{len(run['verdicts'])} accepted |"
        )
    text = "\n".join(lines) + "\n"
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
