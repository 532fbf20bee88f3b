"""The performance model against every published TPU measurement we know, with the residuals.

    JAX_PLATFORMS=cpu python benchmarks/model_vs_published.py [--xla-cost]

For each cell of jax's Pallas TPU matmul guide (v5e, bf16, both tilings and XLA, 1024^3 to
8192^3) it traces the guide's kernel, runs the real static analysis
(perf/pallas_analysis.py), checks it equals the one tests build directly
(perf/published.py), and prints the model's time and its speedup over XLA next to the measured
ones. With --xla-cost the XLA side also comes from XLA's cost analysis compiled ahead of time for
v5e (a few minutes on two cores) instead of the matmul's own flops and bytes. Then jax's Pallas
flash attention with its default 128 blocks against jax issue #24633's 7.3-7.6 TFLOP/s; the issue
gives no batch or head count, so the shape is stated: batch * heads * head_dim = 16384 matches
its FLOP count at every sequence length. The published figures include host dispatch (timeit);
so does the model (DISPATCH_S). Imports jax (tracing only, nothing runs).
"""

from __future__ import annotations

import argparse
import functools
import math
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # other processes may hold libtpu

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu import flash_attention as flash

from maxkernel_tui.kernels import aot
from maxkernel_tui.kernels.perf import published
from maxkernel_tui.kernels.perf.analysis import KernelAnalysis, ReferenceCost
from maxkernel_tui.kernels.perf.model import estimate
from maxkernel_tui.kernels.perf.pallas_analysis import analyze
from maxkernel_tui.kernels.targets import TARGETS

V5E = TARGETS["v5e"]
FLASH_BATCH, FLASH_HEADS, FLASH_HEAD_DIM = 8, 16, 128


def _guide_kernel(x_ref, y_ref, z_ref, acc_ref, *, nsteps):
    @pl.when(pl.program_id(2) == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == nsteps - 1)
    def _store():
        z_ref[...] = acc_ref[...].astype(z_ref.dtype)


def guide_matmul(x: jax.Array, y: jax.Array, bm: int, bk: int, bn: int) -> jax.Array:
    """The guide's matmul: grid (m/bm, n/bn, k/bk), an f32 accumulator in VMEM."""
    m, k = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        functools.partial(_guide_kernel, nsteps=k // bk),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
    )(x, y)


def traced_analysis(size: int, blocks: tuple[int, int, int]) -> KernelAnalysis:
    spec = jax.ShapeDtypeStruct((size, size), jnp.bfloat16)
    jaxpr = jax.make_jaxpr(lambda x, y: guide_matmul(x, y, *blocks))(spec, spec)
    (kernel,) = analyze(jaxpr)
    return kernel


def xla_cost(size: int) -> ReferenceCost:
    spec = jax.ShapeDtypeStruct((size, size), jnp.bfloat16)
    compiled = aot.compile_for_tpu(jnp.matmul, [spec, spec], V5E)
    return ReferenceCost.from_xla(aot.cost_of(compiled))


def _residual(model: float, measured: float) -> str:
    return f"{model / measured - 1:+.1%}"


def matmul_rows(use_xla_cost: bool) -> list[str]:
    rows = [
        f"## Matmul ({published.GUIDE})",
        "",
        "| measurement | measured | model | residual | ratio to XLA measured | model | residual |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell in published.MATMUL_GUIDE:
        if cell.blocks is None:
            continue
        traced = traced_analysis(cell.size, cell.blocks)
        built = published.guide_matmul_analysis(cell.size, cell.blocks)
        cost = xla_cost(cell.size) if use_xla_cost else published.guide_matmul_reference(cell.size)
        found = estimate([traced], V5E, cost)
        same = math.isclose(found.seconds, estimate([built], V5E, cost).seconds, rel_tol=1e-6)
        xla = published.measured(cell.size, "xla")
        ratio = xla.seconds / cell.seconds
        assert found.speedup is not None and found.reference_seconds is not None
        rows.append(
            f"| {cell.label}{'' if same else ' (the built analysis estimates otherwise!)'} | "
            f"{cell.seconds * 1e3:.3f} ms | {found.seconds * 1e3:.3f} ms | "
            f"{_residual(found.seconds, cell.seconds)} | {ratio:.3f} | {found.speedup:.3f} | "
            f"{_residual(found.speedup, ratio)} |"
        )
        if cell.blocks == published.GUIDE_BLOCKS:
            rows.append(
                f"| XLA jnp.matmul at {cell.size}^3 | {xla.seconds * 1e3:.3f} ms | "
                f"{found.reference_seconds * 1e3:.3f} ms | "
                f"{_residual(found.reference_seconds, xla.seconds)} | | | |"
            )
    return rows


def flash_rows() -> list[str]:
    rows = [
        "",
        f"## Flash attention ({published.FLASH_ISSUE})",
        "",
        f"Assumed shape: batch {FLASH_BATCH}, heads {FLASH_HEADS}, head_dim {FLASH_HEAD_DIM}, "
        "not causal (the thread states only the sequence length and the rate).",
        "",
        "| sequence | measured | model | residual | measured TFLOP/s | model TFLOP/s |",
        "|---|---|---|---|---|---|",
    ]
    for seq, milliseconds, tflops in published.FLASH_ATTENTION_V5E:
        shape = (FLASH_BATCH, FLASH_HEADS, seq, FLASH_HEAD_DIM)
        spec = jax.ShapeDtypeStruct(shape, jnp.bfloat16)
        jaxpr = jax.make_jaxpr(flash.flash_attention)(spec, spec, spec)
        found = estimate(analyze(jaxpr), V5E)
        flops = 4.0 * FLASH_BATCH * FLASH_HEADS * seq * seq * FLASH_HEAD_DIM
        rows.append(
            f"| {seq} | {milliseconds:.2f} ms | {found.seconds * 1e3:.2f} ms | "
            f"{_residual(found.seconds, milliseconds / 1e3)} | {tflops:.2f} | "
            f"{flops / found.seconds / 1e12:.2f} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--xla-cost", action="store_true", help="XLA's side from an AOT compile for v5e"
    )
    args = parser.parse_args()
    print("\n".join(matmul_rows(args.xla_cost) + flash_rows()))


if __name__ == "__main__":
    main()
