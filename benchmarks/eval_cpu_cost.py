"""What one `maxkernel-tui eval` costs in CPU: the 8p honest GEMM (a task with an expert, so the
expert comparison runs too), with jax's compilation cache off, then on and cold, then on and
warm. CPU is the whole machine's busy time over the run (/proc/stat): sandboxed workers live in
PID namespaces whose processes are reaped inside them, so the CLI's own child accounting no
longer sees them all. Run it on a quiet machine; wall time is printed beside it.

    python benchmarks/eval_cpu_cost.py [--tiles]

Without --tiles the sampled production tiles are off (MAXKERNEL_TUI_TILE_BLOCKS=off), so the
figures compare with evaluations made before they existed. The figures are this machine's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "tests" / "data" / "kernels" / "honest" / "8p_GEMM.py"


def machine_cpu_seconds() -> float:
    """User, nice and system time of every CPU of the machine since boot."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()[1:4]
    return sum(int(f) for f in fields) / os.sysconf("SC_CLK_TCK")


def _eval(cache: str, tiles: bool) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit code) of one eval with MAXKERNEL_TUI_XLA_CACHE=cache."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", MAXKERNEL_TUI_XLA_CACHE=cache)
    if not tiles:
        env["MAXKERNEL_TUI_TILE_BLOCKS"] = "off"
    before = machine_cpu_seconds()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "maxkernel_tui.cli", "eval", str(KERNEL), "--task", "8p"],
        env=env,
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - started
    return wall, machine_cpu_seconds() - before, done.returncode


def main() -> None:
    tiles = "--tiles" in sys.argv[1:]
    print(f"1-minute load average at the start: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="mkt-xla-bench-") as cache:
        for label, chosen in (("cache off", "off"), ("cache cold", cache), ("cache warm", cache)):
            wall, cpu, code = _eval(chosen, tiles)
            verdict = "accepted" if code == 0 else f"exit {code}"
            print(f"{label:<11} wall {wall:5.1f} s  CPU {cpu:5.1f} s  ({verdict}, measured here)")


if __name__ == "__main__":
    main()
