"""What the production tiles check costs, phase by phase, and what `eval` costs with it on.

    JAX_PLATFORMS=cpu python benchmarks/tiles_cost.py phases [--task 41k] [--kernel K.py]
        [--sample-seed N] [--whole-reference]
    python benchmarks/tiles_cost.py eval [--before OTHER_PYTHON] [--task 41k --kernel K.py ...]

`phases` runs each step of the check in this process (no workers, no sandbox) on the task's
production shapes and prints its seconds: the inputs made from the task's get_inputs and seed
(once per task, then cached), saved (once) and read; the copy each evaluation made before this
change (the candidate's private copy) against the memory-mapped read in place now; the kernel's
sampled output blocks in TPU interpret mode (k of n blocks, with the sample's seed); the reference
over the boxes the sample decides (now), and with --whole-reference the whole reference at
production shape (before, on first use).

`eval` runs `maxkernel-tui eval` on each kernel with OTHER_PYTHON (an install of the code before,
e.g. another worktree's venv), with this Python, and with this Python and `--no-tiles` (what the
tiles check adds), one after the other: first use (a fresh
MAXKERNEL_TUI_CACHE_DIR: no production inputs or reference kept, no XLA cache) then cached (the
same directory again). It prints wall seconds, the verdict, and the tiles check's sample (blocks of
blocks, sample seed) and seconds. Figures are this machine's, measured, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HONEST = ROOT / "tests" / "data" / "kernels" / "honest"
DEFAULT_KERNELS = {"41k": HONEST / "41k_Gemm_Add_ReLU.py", "8p": HONEST / "8p_GEMM.py"}


def phases(task_id: str, kernel: Path, sample_seed: int, whole_reference: bool) -> None:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import numpy as np
    from jax.experimental.pallas import tpu as pltpu

    from maxkernel_tui.kernels import reference_runtime as runtime
    from maxkernel_tui.kernels.evaluation.reference import slices as reference_slices
    from maxkernel_tui.kernels.evaluation.tiles import sampled_run as production_tiles
    from maxkernel_tui.kernels.evaluation.tiles.plan import DEFAULT_TILE_BLOCKS
    from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task

    task = load_task(next(builtin_suite_dir().glob(f"{task_id}_*")))
    module = runtime.load_reference(task)
    candidate = runtime.load_candidate(task, module, kernel)
    config = task.configs[0]
    clock = [time.perf_counter()]

    def lap(name: str, note: str = "") -> None:
        now = time.perf_counter()
        print(f"  {name:<34} {now - clock[0]:7.2f} s  {note}", flush=True)
        clock[0] = now

    print(f"{task.task_id} at {config}, kernel {kernel.name}; load {os.getloadavg()[0]:.1f}")
    dynamic, static = runtime.make_inputs(task, module, config, 0)
    leaves = jax.block_until_ready(jax.tree.leaves(dynamic))
    size = sum(np.asarray(leaf).nbytes for leaf in leaves)
    lap("inputs made (once per task)", f"{size / 2**20:.0f} MiB")
    work = Path(tempfile.mkdtemp(prefix="mkt-tiles-cost-"))
    try:
        files = []
        for number, leaf in enumerate(leaves):
            array = np.asarray(leaf)
            files.append(work / f"input-{number}.npy")
            np.save(files[-1], array.view(f"V{array.dtype.itemsize}"))
        lap("inputs saved (once per task)")
        private = work / "private"
        private.mkdir()
        copies = [Path(shutil.copy(f, private)) for f in files]
        lap("inputs copied (before: every eval)")
        read = [np.load(c, allow_pickle=False) for c in copies]
        _ = [
            jax.numpy.asarray(r.view(leaf.dtype).reshape(leaf.shape))
            for r, leaf in zip(read, leaves)
        ]
        lap("inputs read from the copy (before)")
        mapped = [
            np.load(f, mmap_mode="r", allow_pickle=False).view(leaf.dtype).reshape(leaf.shape)
            for f, leaf in zip(files, leaves)
        ]
        arrays = [jax.numpy.asarray(m) for m in mapped]
        lap("inputs read in place, mapped (now)")
        structure = jax.tree.structure(dynamic)
        program = jax.make_jaxpr(
            lambda *x: candidate.computation(*jax.tree.unflatten(structure, x), *static)
        )(*arrays)
        params = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
        sampled = production_tiles.run_sampled(
            program,
            arrays,
            np.random.default_rng(sample_seed),
            random_blocks=DEFAULT_TILE_BLOCKS,
            params=params,
        )
        blocks = sum(k.blocks for k in sampled.kernels)
        total = sum(k.of_blocks for k in sampled.kernels)
        lap(
            "sampled run (interpret mode)", f"{blocks} of {total} blocks, sample seed {sample_seed}"
        )
        decided = [d.indices for d in sampled.decided]
        reference = jax.make_jaxpr(
            lambda *x: module.computation(*jax.tree.unflatten(structure, x), *static)
        )(*arrays)
        try:
            with jax.default_matmul_precision("highest"):
                for number, (indices, aval) in enumerate(zip(decided, reference.out_avals)):
                    for box in reference_slices.boxes(indices, tuple(aval.shape)):
                        jax.block_until_ready(
                            reference_slices.output_in_box(reference, mapped, number, box)
                        )
            elements = sum(d.size for d in decided)
            lap("reference by regions (now)", f"{elements:,} elements decided")
        except reference_slices.NotSliceable as why:
            lap("reference by regions (now)", f"not sliceable: {why}")
        del arrays, read
        if whole_reference:
            with jax.default_matmul_precision("highest"):
                jax.block_until_ready(module.computation(*dynamic, *static))
            lap("whole reference (before: first use)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _eval(
    python: str, kernel: Path, task_id: str, cache: Path, flags: tuple[str, ...] = ()
) -> dict[str, Any]:
    env = dict(os.environ, JAX_PLATFORMS="cpu", MAXKERNEL_TUI_CACHE_DIR=str(cache))
    env.pop("MAXKERNEL_TUI_TILE_BLOCKS", None)  # the default sample
    started = time.perf_counter()
    done = subprocess.run(
        [
            python,
            "-m",
            "maxkernel_tui.cli",
            "eval",
            str(kernel),
            "--task",
            task_id,
            "--json",
            *flags,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"wall": wall, "verdict": f"exit {done.returncode}: {done.stderr[-300:]}"}
    tiles = next((c for c in report["checks"] if c["name"] == "tiles"), None)
    sample = (
        f"{tiles['data'].get('blocks')} of {tiles['data'].get('of_blocks')} blocks, "
        f"sample seed {tiles['data'].get('sample_seed')}, tiles {tiles['status']} "
        f"{tiles['seconds']:.1f} s"
        if tiles and tiles.get("data")
        else (tiles["detail"][:80] if tiles else "no tiles check")
    )
    return {"wall": wall, "verdict": report["verdict"], "sample": sample}


def evals(before: str | None, kernels: dict[str, Path]) -> None:
    print(f"load at the start {os.getloadavg()[0]:.1f}")
    runs: list[tuple[str, str, tuple[str, ...]]] = [("before", before, ())] if before else []
    runs += [("after", sys.executable, ()), ("no tiles", sys.executable, ("--no-tiles",))]
    for task_id, kernel in kernels.items():
        for label, python, flags in runs:
            cache = Path(tempfile.mkdtemp(prefix="mkt-tiles-eval-"))
            try:
                for use in ("first use", "cached"):
                    found = _eval(python, kernel, task_id, cache, flags)
                    print(
                        f"{task_id:<4} {label:<8} {use:<9} {found['wall']:6.1f} s  "
                        f"{found['verdict']}  {found.get('sample', '')}  "
                        f"(load {os.getloadavg()[0]:.1f})",
                        flush=True,
                    )
            finally:
                shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("phases", "eval"))
    parser.add_argument("--task", action="append", help="task id prefix (default: 41k and 8p)")
    parser.add_argument("--kernel", type=Path, action="append", help="one per --task")
    parser.add_argument("--sample-seed", type=int, default=1)
    parser.add_argument("--whole-reference", action="store_true")
    parser.add_argument("--before", help="the Python of an install of the code before")
    parser.add_argument(
        "--kernel-dir", type=Path, help="TASK.py kernels for tasks without --kernel"
    )
    args = parser.parse_args()
    tasks = args.task or list(DEFAULT_KERNELS)
    given = args.kernel or []
    kernels = {
        t: given[n] if n < len(given) else DEFAULT_KERNELS.get(t) or args.kernel_dir / f"{t}.py"
        for n, t in enumerate(tasks)
    }
    if args.mode == "phases":
        for task_id, kernel in kernels.items():
            phases(task_id, kernel, args.sample_seed, args.whole_reference)
    else:
        evals(args.before, kernels)


if __name__ == "__main__":
    main()
