"""Does a session converge? `run --max-iterations 2` and `search --algorithm beam --max-evals 6`
with the built-in provider on two task folders in MaxKernel's plain format, written here: a GEMM
+ bias + GELU whose three sizes coincide (512), and a matmul + sigmoid + row sum. For each run it
reports, from the session's store: evaluations, evaluations of a kernel already judged (same
normalised source, judged twice), the minutes to the first accepted evaluation, the exit status,
and whether `eval` accepts the kernel written with `--out`. No jax in this process.

    python benchmarks/convergence.py [--out DIR] [--only run|search] [--task NAME]

Each run gets its own data folder under DIR (default: a temporary one); the cache folder is
shared, so the tasks' descriptions are computed once.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from maxkernel_tui.agents.orchestration.fingerprint import kernel_hash  # noqa: E402

_YAML = """task_id: {task_id}
description: Kernel task for {task_id}
input_gen_code: ""
atol: 0.01
rtol: 0.01
"""

TASKS = {
    # M, K and N all 512: a size bound by its value would be bound to the wrong axis
    "90k_Gemm_Bias_GELU_square": """
        import jax
        import jax.numpy as jnp


        def get_inputs(dtype=jnp.float32):
            batch_size = 512
            in_features = 512
            out_features = 512
            key = jax.random.key(0)
            k1, k2 = jax.random.split(key)
            x = jax.random.normal(k1, (batch_size, in_features), dtype=dtype)
            w = jax.random.normal(k2, (in_features, out_features), dtype=dtype) * 0.05
            b = jax.random.normal(jax.random.key(0xBADC0DE), (out_features,), dtype=dtype)
            return [x, w, b], []


        def computation(x, w, b):
            return jax.nn.gelu(x @ w + b)
        """,
    # MaxKernel's 36k style: a matmul, a sigmoid, a sum over each row (sizes in a dict)
    "91k_Matmul_Sigmoid_RowSum": """
        import jax
        import jax.numpy as jnp


        def get_inputs(dtype=jnp.float32):
            config = {"batch_size": 256, "input_size": 1024, "hidden_size": 512}
            key = jax.random.key(42)
            k1, k2 = jax.random.split(key)
            x = jax.random.normal(k1, (config["batch_size"], config["input_size"]), dtype=dtype)
            w = jax.random.normal(
                k2, (config["input_size"], config["hidden_size"]), dtype=dtype
            ) * 0.03
            return [x, w], []


        def computation(x, w):
            return jnp.sum(jax.nn.sigmoid(x @ w), axis=1, keepdims=True)
        """,
}


def write_task(folder: Path, task_id: str) -> Path:
    task = folder / task_id
    task.mkdir(parents=True, exist_ok=True)
    (task / "kernel_task.yaml").write_text(_YAML.format(task_id=task_id))
    (task / "reference.py").write_text(textwrap.dedent(TASKS[task_id]).lstrip())
    return task


def _env(data: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "KEY" not in k and "TOKEN" not in k}
    env.update(
        HOME=str(data / "home"),
        MAXKERNEL_TUI_DATA_DIR=str(data),
        MAXKERNEL_TUI_CACHE_DIR=str(cache),
        MAXKERNEL_TUI_CONFIG=str(data / "none.toml"),
        JAX_PLATFORMS="cpu",
    )
    return env


def store_figures(store: Path, started: float) -> dict[str, object]:
    """Evaluations, repeats and the minutes to the first accepted one, from the store."""
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT k.source, e.verdict, e.created FROM evaluations e "
            "JOIN kernel_versions k ON k.id = e.kernel_version_id ORDER BY e.id"
        ).fetchall()
        edge_passes = db.execute(
            "SELECT count(*) FROM events WHERE kind = 'evaluation' AND "
            "json_extract(payload, '$.step') LIKE '%tester%'"
        ).fetchone()[0]
    seen: set[str] = set()
    repeats = 0
    for source, _, _ in rows:
        digest = kernel_hash(source)
        repeats += digest in seen
        seen.add(digest)
    first = next((created for _, verdict, created in rows if verdict == "accepted"), None)
    return {
        "evaluations": len(rows),
        "edge_passes": edge_passes,  # an accepted kernel's extra numerics on the edge cases
        "judged_twice": max(0, repeats - edge_passes),
        "minutes_to_first_accepted": None if first is None else round((first - started) / 60, 2),
    }


def one(kind: str, task: Path, out: Path, cache: Path) -> dict[str, object]:
    data = out / f"{kind}-{task.name}"
    data.mkdir(parents=True, exist_ok=True)
    kernel = data / "best.py"
    args = ["--task", str(task), "--provider", "builtin", "--out", str(kernel)]
    if kind == "run":
        args = ["run", *args, "--max-iterations", "2"]
    else:
        args = ["search", *args, "--algorithm", "beam", "--max-evals", "6"]
    env = _env(data, cache)
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "maxkernel_tui.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    minutes = round((time.time() - started) / 60, 2)
    (data / "log.txt").write_text(done.stdout + done.stderr)
    figures: dict[str, object] = {
        "kind": kind,
        "task": task.name,
        "exit": done.returncode,
        "minutes": minutes,
        **store_figures(data / "sessions.db", started),
    }
    if kernel.exists():
        judged = subprocess.run(
            [sys.executable, "-m", "maxkernel_tui.cli", "eval", str(kernel), "--task", str(task)],
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        figures["eval_accepts"] = "verdict: ACCEPTED" in judged.stdout
    else:
        figures["eval_accepts"] = None
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", choices=("run", "search"))
    parser.add_argument("--task", choices=sorted(TASKS))
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="convergence-"))
    tasks = [write_task(out / "tasks", t) for t in sorted(TASKS) if args.task in (None, t)]
    cache = out / "cache"
    for task in tasks:
        for kind in ("run", "search"):
            if args.only in (None, kind):
                print(json.dumps(one(kind, task, out, cache)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
