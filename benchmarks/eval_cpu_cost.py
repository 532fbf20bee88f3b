"""What one `maxkernel-tui eval` costs in CPU: the 8p honest GEMM (a task with an expert, so the
expert comparison runs too), with jax's compilation cache off, then on and cold, then on and
warm. CPU is the user+system time of the CLI and every worker it waited for (getrusage of the
children), so it is steadier than wall time on a shared machine; both are printed. This
process is the subreaper of what the CLI starts: a sandboxed worker whose keeper was killed
with it is reaped (and counted) here rather than by init.

    python benchmarks/eval_cpu_cost.py

Run it on a quiet machine: the figures are this machine's.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_PR_SET_CHILD_SUBREAPER = 36
KERNEL = ROOT / "tests" / "data" / "kernels" / "honest" / "8p_GEMM.py"


def _eval(cache: str) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit code) of one eval with MAXKERNEL_TUI_XLA_CACHE=cache."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", MAXKERNEL_TUI_XLA_CACHE=cache)
    _reap_orphans()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "maxkernel_tui.cli", "eval", str(KERNEL), "--task", "8p"],
        env=env,
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - started
    _reap_orphans()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def _reap_orphans() -> None:
    """Wait for every process re-parented here (the CLI's workers, all ended with it)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main() -> None:
    ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    print(f"1-minute load average at the start: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="mkt-xla-bench-") as cache:
        for label, chosen in (("cache off", "off"), ("cache cold", cache), ("cache warm", cache)):
            wall, cpu, code = _eval(chosen)
            verdict = "accepted" if code == 0 else f"exit {code}"
            print(f"{label:<11} wall {wall:5.1f} s  CPU {cpu:5.1f} s  ({verdict}, measured here)")


if __name__ == "__main__":
    main()
