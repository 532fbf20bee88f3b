"""Measured on a TPU: the built-in agent's kernels a beam search started from and ended with, and
the XLA reference, at a built-in task's production (`bench`) shapes. The kernels are the agent's
multi-stage plan rendered at the given block sizes (rows, cols, depth), as benchmarks/
beam_search.py's nodes hold them (each kernel's source hash is printed to compare). Each
function is jitted, warmed up, then timed `--runs` times with `block_until_ready`; the median
and the spread (min..max) are printed in ms, with each kernel's speedup over XLA as the
reference is written. Run it on the TPU machine:

    python benchmarks/beam_search_timing.py --task 36k_Matmul_Sigmoid_Sum \
        1024,2048,512 1024,2048,2048 1024,1024,2048
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import jax

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from maxkernel_tui.agents.builtin.draft import plan_task  # noqa: E402
from maxkernel_tui.agents.builtin.tunables import Tunables  # noqa: E402
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task  # noqa: E402


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"m{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(fn: Callable[..., Any], args: tuple[Any, ...], runs: int) -> list[float]:
    jitted = jax.jit(fn)
    for _ in range(3):  # compile, then warm up
        jax.block_until_ready(jitted(*args))
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        jax.block_until_ready(jitted(*args))
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("tunables", nargs="+", help="ROWS,COLS,DEPTH")
    args = parser.parse_args()
    task = load_task(builtin_suite_dir() / args.task)
    plans = plan_task(task, choose_precision=True)
    plan = next(p for p in plans if p.family.startswith("multi"))
    reference = load(task.folder / "reference.py")
    dynamic, static = reference.get_inputs("bench", 0)
    inputs = (*dynamic, *static)
    print(f"{args.task} at bench shapes on {jax.devices()[0].device_kind} (measured)")
    xla = statistics.median(timed(reference.computation, inputs, args.runs))
    print(f"  XLA reference: {xla * 1e3:.3f} ms (median of {args.runs})")
    folder = Path(tempfile.mkdtemp(prefix="beam-timing-"))
    for text in args.tunables:
        rows, cols, depth = (int(v) for v in text.split(","))
        source = plan.render(Tunables(rows, cols, depth))
        path = folder / f"k_{rows}_{cols}_{depth}.py"
        path.write_text(source, encoding="utf-8")
        runs = timed(load(path).computation, inputs, args.runs)
        median = statistics.median(runs)
        digest = hashlib.sha256(source.encode()).hexdigest()[:12]
        print(
            f"  {text} ({digest}): {median * 1e3:.3f} ms (median of {args.runs}, "
            f"{min(runs) * 1e3:.3f}..{max(runs) * 1e3:.3f}), {xla / median:.3f}x of XLA"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
