"""`maxkernel-tui tasks --path DIR --no-cost` over 50 plain task folders of our own, cold and warm.

The folders are MaxKernel's plain adapted format in its three ways of writing sizes (named
integers; a dict of sizes read by subscript with string entries beside them; literals in the
calls) across five families (GEMM + epilogue, a GEMM with a row sum whose sizes coincide,
attention with 24 heads, a conv of small sizes, a GEMM + GroupNorm of 48 groups), each at
several batch sizes (tests/support/maxkernel_styles.py). Describing derives `check` and
`heldout`, traces every configuration, and runs the reference on the derived `check`.

Cold: a fresh cache directory (no descriptions, no XLA compilation cache). Warm: the same
command again. With `--baseline DIR` (another checkout's source, e.g. `git archive main`
unpacked), the same folders are described by that code first, in the same run, so the two
are compared at the same load. Writes benchmarks/results/describe_plain_tasks.md.

    python benchmarks/describe_plain_tasks.py [--baseline DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support holds the task folders' writer

from tests.support.maxkernel_styles import FAMILIES, STYLES, write_styled  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "describe_plain_tasks.md"
TASKS = 50
COMMAND = "python benchmarks/describe_plain_tasks.py"


def write_tasks(root: Path) -> list[str]:
    """TASKS folders: every family in every style, then again at doubled batch sizes."""
    written: list[str] = []
    scale = 1
    while len(written) < TASKS:
        for family, spec in FAMILIES.items():
            for style in STYLES:
                if len(written) == TASKS:
                    return written
                sizes = dict(spec.sizes, batch=spec.sizes["batch"] * scale)
                variant = f"{family}_b{sizes['batch']}"
                FAMILIES[variant] = dataclasses.replace(spec, sizes=sizes)
                try:
                    written.append(write_styled(root, variant, style).name)
                finally:
                    del FAMILIES[variant]
        scale *= 2
    return written


def run_tasks(
    path: Path, cache: Path, code: Path = ROOT, allow_errors: bool = False
) -> tuple[float, dict]:
    """`tasks --json --no-cost --path` over `path` with the package of the checkout `code`;
    `allow_errors`: a listing with tasks in error (exit status 1) is an answer too."""
    env = dict(
        os.environ, MAXKERNEL_TUI_CACHE_DIR=str(cache), JAX_PLATFORMS="cpu", PYTHONPATH=str(code)
    )
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "maxkernel_tui.cli",
            "tasks",
            "--json",
            "--no-cost",
            "--path",
            str(path),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=not allow_errors,
        cwd=code,  # `-m` looks in the working directory first
    )
    return time.perf_counter() - start, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mkt-plain-tasks-"))
    names = write_tasks(root / "tasks")
    load = os.getloadavg()[0]
    baseline = []
    if args.baseline is not None:
        base_cold, _ = run_tasks(root / "tasks", root / "baseline-cache", args.baseline.resolve())
        base_warm, _ = run_tasks(root / "tasks", root / "baseline-cache", args.baseline.resolve())
        baseline = [
            f"- baseline `{args.baseline}`, the same folders in the same run, before the above: "
            f"cold **{base_cold:.1f} s**, warm **{base_warm:.1f} s**",
        ]
    cold, listing = run_tasks(root / "tasks", root / "cache")
    warm, _ = run_tasks(root / "tasks", root / "cache")
    rows, failures = [], []
    for record in listing["tasks"]:
        derivation = record.get("derivation") or {}
        sizes = derivation.get("sizes", {})
        error = record.get("error")
        if error or not derivation.get("derived"):
            failures.append(f"- {record.get('task_id')}: {error or derivation.get('fallback')}")
            continue
        shown = "; ".join(
            f"{config}: " + " ".join(f"{k}={v}" for k, v in sizes[config].items())
            for config in ("check", "heldout")
        )
        rows.append(f"| {record['task_id']} | {shown} |")
    lines = [
        "# Describing 50 plain task folders of our own (measured wall times)",
        "",
        f"`{COMMAND}`, {datetime.date.today()}, on this {os.cpu_count()}-core machine, shared "
        f"(1-minute load average {load:.1f} at the start): `maxkernel-tui tasks --json --no-cost "
        f"--path DIR` over {len(names)} folders, 2 worker processes.",
        "",
        f"- cold (fresh cache: no descriptions, no XLA compilation cache): **{cold:.1f} s** "
        "(goal < 180 s)",
        f"- warm (the same command again): **{warm:.1f} s** (goal: seconds)",
        *baseline,
        f"- 1-minute load average at the end: {os.getloadavg()[0]:.1f}",
        f"- derived and validated: {len(rows)} of {len(names)}",
        *failures,
        "",
        "| task | derived configurations |",
        "|---|---|",
        *rows,
    ]
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
