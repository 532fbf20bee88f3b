"""Two waits of the workbench, each in a real terminal (tmux), from a key to what it should do:
`ctrl+q` until the process has exited (the evaluation workers warmed, as after any start), and
`F5` until the planner's first plan is on screen, on a plain task folder in MaxKernel's adapted
format (36k_Matmul_Sigmoid_Sum at its production sizes, as that dataset writes it) with a cold
cache (a fresh cache and data directory per run: the task
is described and its reference compiled for the TPU on the way), with the built-in agent. The
status line's stages seen while starting are recorded. Median of RUNS runs each.
Writes benchmarks/results/workbench_timings.md.

    python benchmarks/workbench_timings.py [TASK_FOLDER]
"""

from __future__ import annotations

import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = pathlib.Path(__file__).parent / "results" / "workbench_timings.md"
PLAIN_YAML = """task_id: 36k_Matmul_Sigmoid_Sum
description: Kernel task for 36k_Matmul_Sigmoid_Sum
input_gen_code: ""
atol: 0.01
rtol: 0.01
"""
PLAIN_REFERENCE = """import jax
import jax.numpy as jnp


def get_inputs(dtype=jnp.float32):
    batch_size = 4096
    in_features = 8192
    out_features = 8192
    key = jax.random.key(0)
    k1, k2, k3 = jax.random.split(key, 3)
    x = jax.random.uniform(k1, (batch_size, in_features), dtype=dtype)
    weight = jax.random.normal(k2, (in_features, out_features), dtype=dtype) * 0.02
    bias = jax.random.normal(k3, (out_features,), dtype=dtype) * 0.02
    return [x, weight, bias], []


def computation(x, weight, bias):
    y = jnp.matmul(x, weight) + bias
    return jnp.sum(jax.nn.sigmoid(y), axis=1, keepdims=True)
"""
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
QUIT_AFTER = (2.0, 40.0)  # seconds past the first frame: workers starting, workers warm


def screen(socket: str) -> str:
    return subprocess.run(
        ["tmux", "-L", socket, "capture-pane", "-p", "-t", "t"], capture_output=True, text=True
    ).stdout


def wait_for(condition, timeout: float, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(interval)
    raise TimeoutError(f"not within {timeout} s")


def launch(task: pathlib.Path | str, home: pathlib.Path, socket: str) -> pathlib.Path:
    """The workbench on `task` in tmux, with its own cache and data; the file its exit writes."""
    exited = home / "exited"
    env = (
        f"env -i HOME={home} PATH=/usr/bin:/bin TERM=xterm-256color JAX_PLATFORMS=cpu "
        f"MAXKERNEL_TUI_CACHE_DIR={home / 'cache'} MAXKERNEL_TUI_DATA_DIR={home / 'data'}"
    )
    app = f"{sys.executable} -m maxkernel_tui.cli --task '{task}'"
    command = f"{env} {app}; touch {exited}; sleep 60"
    subprocess.run(
        ["tmux", "-L", socket, "new-session", "-d", "-s", "t", "-x", "160", "-y", "48", command],
        check=True,
    )
    wait_for(lambda: "─ Source" in screen(socket) and "─ Tests" in screen(socket), 60)
    return exited


def quit_seconds(run: int, after: float) -> float:
    """ctrl+q `after` seconds past the first frame (the evaluation workers start once it is
    drawn: their fork server imports jax for several seconds)."""
    socket = f"mkt-bench-quit-{os.getpid()}-{run}"
    home = pathlib.Path(tempfile.mkdtemp(prefix="mkt-quit-"))
    try:
        exited = launch("12p_RMSNorm", home, socket)
        time.sleep(after)
        start = time.perf_counter()
        subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "t", "C-q"], check=True)
        wait_for(exited.exists, 30, interval=0.01)
        return time.perf_counter() - start
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


def first_plan_seconds(task: pathlib.Path, run: int) -> tuple[float, list[str]]:
    """Seconds from F5 to the plan on screen, and each stage the status line named, with the
    second it first showed."""
    socket = f"mkt-bench-plan-{os.getpid()}-{run}"
    home = pathlib.Path(tempfile.mkdtemp(prefix="mkt-plan-"))
    stages: list[str] = []
    seen: list[str] = []
    try:
        launch(task, home, socket)
        start = time.perf_counter()
        subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "t", "F5"], check=True)

        def planned() -> bool:
            text = screen(socket)
            status = text.splitlines()[0] if text else ""
            step = status.split(" ─ ")[3] if status.count(" ─ ") > 3 else ""
            if step and (not seen or seen[-1] != step):
                seen.append(step)
                stages.append(f"{step} ({time.perf_counter() - start:.1f} s)")
            return "proposes a plan" in text

        wait_for(planned, 600, interval=0.1)
        return time.perf_counter() - start, stages
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


def plain_task() -> pathlib.Path:
    folder = pathlib.Path(tempfile.mkdtemp(prefix="mkt-plain-")) / "36k_Matmul_Sigmoid_Sum"
    folder.mkdir()
    (folder / "kernel_task.yaml").write_text(PLAIN_YAML)
    (folder / "reference.py").write_text(PLAIN_REFERENCE)
    return folder


def main() -> None:
    task = pathlib.Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else plain_task()
    quits = {after: [quit_seconds(run, after) for run in range(RUNS)] for after in QUIT_AFTER}
    plans = [first_plan_seconds(task, run) for run in range(RUNS)]
    load = os.getloadavg()[0]
    lines = [
        "# Workbench waits (measured)",
        "",
        f"Measured by `benchmarks/workbench_timings.py` in tmux on a shared {os.cpu_count()}-core "
        f"machine (load average {load:.1f} at the end), median of {RUNS} runs.",
        "",
        "| wait | median (s) | runs (s) |",
        "|---|---:|---|",
        *(
            f"| ctrl+q {after:.0f} s after the first frame, until the process has exited (12p) "
            f"| {statistics.median(runs):.2f} | {', '.join(f'{q:.2f}' for q in runs)} |"
            for after, runs in quits.items()
        ),
        f"| F5 until the first plan is shown ({task.name}, plain folder, cold cache) "
        f"| {statistics.median(p for p, _ in plans):.1f} "
        f"| {', '.join(f'{p:.1f}' for p, _ in plans)} |",
        "",
        "Status line while starting (last run; seconds after F5 when each stage showed): "
        + " → ".join(plans[-1][1]),
        "",
    ]
    RESULTS.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
