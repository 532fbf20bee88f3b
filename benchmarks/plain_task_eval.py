"""`eval` and `profile` on a plain task at a production size no CPU can interpret.

A task in MaxKernel's plain format (sizes as local integers, fixed keys): GEMM + bias + ReLU,
f32, 4096x8192 @ 8192x8192. Its `check` (2048^3) and `heldout` are derived from those sizes.
Times, on this machine:
  - `Harness.evaluate` of a correct Pallas GEMM (512x512 output tiles, 1024-deep) with 3 fresh
    seeds on check and one held-out run (goal: under 90 s);
  - `profile_kernel` (goal: under 120 s; its host trace runs at check shapes).
Writes benchmarks/results/plain_task_eval.md with the machine's load average, since the figures
are wall times on a shared machine.

    JAX_PLATFORMS=cpu python benchmarks/plain_task_eval.py
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import textwrap
import time

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.profiling.profile import profile_kernel
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.checks import format_report

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "plain_task_eval.md"

REFERENCE = """
import jax
import jax.numpy as jnp


def get_inputs(dtype=jnp.float32):
    batch_size = 4096
    in_features = 8192
    out_features = 8192
    k1, k2 = jax.random.split(jax.random.key(0))
    x = jax.random.normal(k1, (batch_size, in_features), dtype=dtype)
    w = jax.random.normal(k2, (in_features, out_features), dtype=dtype) * 0.01
    b = jax.random.normal(jax.random.key(0xBADC0DE), (out_features,), dtype=dtype)
    return [x, w, b], []


def computation(x, w, b):
    return jax.nn.relu(x @ w + b)
"""

KERNEL = """
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_M = 512
BLOCK_N = 512
BLOCK_K = 1024


def _kernel(x_ref, w_ref, b_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _done():
        o_ref[...] = jnp.maximum(acc_ref[...] + b_ref[...], 0.0).astype(o_ref.dtype)


def computation(x, w, b):
    m, depth = x.shape
    n = w.shape[1]
    return pl.pallas_call(
        _kernel,
        grid=(m // BLOCK_M, n // BLOCK_N, depth // BLOCK_K),
        in_specs=[
            pl.BlockSpec((BLOCK_M, BLOCK_K), lambda i, j, k: (i, k)),
            pl.BlockSpec((BLOCK_K, BLOCK_N), lambda i, j, k: (k, j)),
            pl.BlockSpec((1, BLOCK_N), lambda i, j, k: (0, j)),
        ],
        out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((BLOCK_M, BLOCK_N), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
    )(x, w, b.reshape(1, n))
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp) / "41k_Gemm_Add_ReLU_4096x8192x8192"
        folder.mkdir()
        (folder / "kernel_task.yaml").write_text(
            f"task_id: {folder.name}\ndescription: plain GEMM\natol: 0.001\nrtol: 0.001\n"
        )
        (folder / "reference.py").write_text(textwrap.dedent(REFERENCE))
        kernel = pathlib.Path(tmp) / "gemm.py"
        kernel.write_text(textwrap.dedent(KERNEL))
        task = load_task(folder)
        load_before = os.getloadavg()[0]
        with Harness() as harness:
            started = time.perf_counter()
            report = harness.evaluate(KernelSource.read(kernel), task, EvalOptions(seeds=3))
            eval_seconds = time.perf_counter() - started
        started = time.perf_counter()
        summary = profile_kernel(
            KernelSource.read(kernel), task, targets=("v5e",), trace_root=pathlib.Path(tmp)
        )
        profile_seconds = time.perf_counter() - started
    lines = [
        "# eval and profile of a plain 4096x8192x8192 f32 GEMM task",
        "",
        "`JAX_PLATFORMS=cpu python benchmarks/plain_task_eval.py`, "
        f"{time.strftime('%Y-%m-%d')}; wall times measured on this machine (2 cores, shared: "
        f"1-minute load average {load_before:.1f} at the start).",
        "",
        f"- eval, 3 fresh seeds on the derived check and one held-out run: **{eval_seconds:.1f} s**"
        f" (goal < 90 s), verdict {report.verdict}",
        f"- profile (host trace at {summary.trace.config if summary.trace else '-'} shapes): "
        f"**{profile_seconds:.1f} s** (goal < 120 s)",
        "",
        "```",
        format_report(report),
        "```",
    ]
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
