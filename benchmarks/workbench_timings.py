"""The workbench's waits, each in a real terminal (tmux), from a key to what it should do:
- `ctrl+q` until the process has exited: 2 s after the first frame (the evaluation workers'
  fork server still importing jax), 40 s after (the workers warm), and 5 s after `F5` on the
  plain folder below with a cold cache (the task being described, the agent drafting ahead);
- `F5` until the planner's first plan is on screen, on a plain task folder in MaxKernel's
  adapted format (36k_Matmul_Sigmoid_Sum at its production sizes, as that dataset writes it)
  with a cold cache (a fresh cache and data directory per run: the task is described and its
  reference compiled for the TPU on the way), with the built-in agent. The status line's stages
  seen while starting are recorded.
With `--before TREE` (a checkout of the code to compare with, e.g. `git worktree add TREE main`)
each wait is measured for both, alternating, in the same run. Median of RUNS runs each.
Writes benchmarks/results/workbench_timings.md.

    python benchmarks/workbench_timings.py [TASK_FOLDER] [--before TREE] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support holds the task folders' writer
from tests.support.task_folders import write_plain  # noqa: E402

PLAIN_TASK = "36k_Matmul_Sigmoid_Sum"
RESULTS = pathlib.Path(__file__).parent / "results" / "workbench_timings.md"
QUIT_AFTER = (2.0, 40.0)  # seconds past the first frame: workers starting, workers warm
QUIT_AFTER_F5 = 5.0  # seconds past F5: the task being described, the agent drafting ahead
THIS = ROOT  # the code measured, or compared with (--before)


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


def launch(
    task: pathlib.Path | str, home: pathlib.Path, socket: str, code: pathlib.Path
) -> pathlib.Path:
    """The workbench of the checkout `code` on `task` in tmux, with its own cache and data;
    the file its exit writes."""
    exited = home / "exited"
    env = (
        f"env -i HOME={home} PATH=/usr/bin:/bin TERM=xterm-256color JAX_PLATFORMS=cpu "
        f"MAXKERNEL_TUI_CACHE_DIR={home / 'cache'} MAXKERNEL_TUI_DATA_DIR={home / 'data'} "
        f"PYTHONPATH={code}"
    )
    app = f"{sys.executable} -m maxkernel_tui.cli --task '{task}'"
    command = f"{env} {app}; touch {exited}; sleep 60"
    subprocess.run(
        ["tmux", "-L", socket, "new-session", "-d", "-s", "t", "-x", "160", "-y", "48", command],
        check=True,
    )
    wait_for(lambda: "─ Source" in screen(socket) and "─ Tests" in screen(socket), 60)
    return exited


def press(socket: str, key: str) -> float:
    subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "t", key], check=True)
    return time.perf_counter()


def quit_seconds(code: pathlib.Path, task: pathlib.Path | str, after: float, f5: bool) -> float:
    """ctrl+q `after` seconds past the first frame (the evaluation workers start once it is
    drawn: their fork server imports jax for several seconds), or past F5."""
    socket = f"mkt-bench-quit-{os.getpid()}-{time.monotonic_ns()}"
    home = pathlib.Path(tempfile.mkdtemp(prefix="mkt-quit-"))
    try:
        exited = launch(task, home, socket, code)
        if f5:
            press(socket, "F5")
        time.sleep(after)
        start = press(socket, "C-q")
        wait_for(exited.exists, 120, interval=0.01)
        return time.perf_counter() - start
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


def first_plan_seconds(code: pathlib.Path, task: pathlib.Path) -> tuple[float, list[str]]:
    """Seconds from F5 to the plan on screen, and each stage the status line named, with the
    second it first showed."""
    socket = f"mkt-bench-plan-{os.getpid()}-{time.monotonic_ns()}"
    home = pathlib.Path(tempfile.mkdtemp(prefix="mkt-plan-"))
    stages: list[str] = []
    seen: list[str] = []
    try:
        launch(task, home, socket, code)
        start = press(socket, "F5")

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
    return write_plain(pathlib.Path(tempfile.mkdtemp(prefix="mkt-plain-")), PLAIN_TASK, tol=0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", nargs="?", type=pathlib.Path, help="a plain task folder")
    parser.add_argument("--before", type=pathlib.Path, help="a checkout to compare with")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    task = args.task.resolve() if args.task else plain_task()
    codes = {"this checkout": THIS}
    if args.before:
        codes = {f"before ({args.before})": args.before.resolve(), **codes}
    loads = [os.getloadavg()[0]]
    waits: dict[str, dict[str, list[float]]] = {}
    stages: dict[str, list[str]] = {}

    def record(wait: str, name: str, seconds: float) -> None:
        waits.setdefault(wait, {}).setdefault(name, []).append(seconds)
        loads.append(os.getloadavg()[0])
        print(f"{wait} [{name}]: {seconds:.2f} s (load {loads[-1]:.1f})", flush=True)

    for _ in range(args.runs):  # the variants alternate, so that each sees the same load
        for name, code in codes.items():
            for after in QUIT_AFTER:
                wait = f"ctrl+q {after:.0f} s after the first frame, until the process exited (12p)"
                record(wait, name, quit_seconds(code, "12p_RMSNorm", after, f5=False))
            wait = (
                f"ctrl+q {QUIT_AFTER_F5:.0f} s after F5 (describing, drafting ahead), until the "
                f"process exited ({task.name}, cold cache)"
            )
            record(wait, name, quit_seconds(code, task, QUIT_AFTER_F5, f5=True))
            seconds, stages[name] = first_plan_seconds(code, task)
            record(
                f"F5 until the first plan is shown ({task.name}, plain, cold cache)", name, seconds
            )
    header = " | ".join(f"{name}: median (runs), s" for name in codes)
    lines = [
        "# Workbench waits (measured)",
        "",
        f"Measured by `benchmarks/workbench_timings.py` in tmux on a shared {os.cpu_count()}-core "
        f"machine, load average {min(loads):.1f} to {max(loads):.1f} during the run, median of "
        f"{args.runs} runs" + (", the checkouts alternating" if len(codes) > 1 else "") + ".",
        "",
        f"| wait | {header} |",
        "|---|" + "---|" * len(codes),
        *(
            f"| {wait} | "
            + " | ".join(
                f"{statistics.median(runs[name]):.2f} ({', '.join(f'{r:.2f}' for r in runs[name])})"
                for name in codes
            )
            + " |"
            for wait, runs in waits.items()
        ),
        "",
        *(
            f"Status line while starting, {name} (last run; seconds after F5 when each stage "
            "showed): " + " → ".join(seen)
            for name, seen in stages.items()
        ),
        "",
    ]
    RESULTS.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
