"""Start-up cost of the front end, which must not pay jax's import.

Side by side in one run: `python -c "import jax"`, `maxkernel-tui --version`, importing the app
module (Textual, no jax), and `maxkernel-tui tasks --no-cost` with a warm cache (50 tasks listed
from the cache, no worker started). Median of 7 runs each. Writes
benchmarks/results/cli_startup.md.

    python benchmarks/cli_startup.py
"""

from __future__ import annotations

import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

RESULTS = pathlib.Path(__file__).parent / "results" / "cli_startup.md"
RUNS = 7


def median_seconds(argv: list[str], env: dict[str, str]) -> float:
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    cache = tempfile.mkdtemp(prefix="mkt-bench-")
    env = dict(os.environ, JAX_PLATFORMS="cpu", MAXKERNEL_TUI_CACHE_DIR=cache)
    cli = [sys.executable, "-m", "maxkernel_tui.cli"]
    subprocess.run(
        [*cli, "tasks", "--no-cost"], env=env, check=True, capture_output=True
    )  # warm the cache
    cases = {
        "python -c 'import jax' (reference point)": [sys.executable, "-c", "import jax"],
        "maxkernel-tui --version": [*cli, "--version"],
        "import maxkernel_tui.app (Textual, task picker)": [
            sys.executable,
            "-c",
            "import maxkernel_tui.app",
        ],
        "maxkernel-tui tasks --no-cost (50 tasks, warm cache)": [*cli, "tasks", "--no-cost"],
    }
    results = {name: median_seconds(argv, env) for name, argv in cases.items()}
    lines = [
        "# Front-end start-up (measured)",
        "",
        f"Measured by `benchmarks/cli_startup.py`, median of {RUNS} runs each, side by side in one "
        "run "
        f"on a shared {os.cpu_count()}-core machine.",
        "",
        "| command | median (s) |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {seconds:.3f} |" for name, seconds in results.items()]
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
