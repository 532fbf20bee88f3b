"""The performance model against JAXBench's measured expert-vs-XLA table (TPU v6e-1, bf16, median
of 100 after 5 warm-ups; priority_kernels/RESULTS.md, facts in perf/published.py).

    JAX_PLATFORMS=cpu python benchmarks/model_vs_jaxbench.py [--target v6e] [--only flash,gemm]

For each workload at the shapes the table was measured at: the XLA side is our own jnp program of
the workload (the same math as JAXBench's baseline), compiled ahead of time for the generation
(XLA's cost analysis) and estimated by perf/xla_model.py; the expert side is jax's own Pallas
kernel that JAXBench's expert calls (`jax.experimental.pallas.ops.tpu`), with JAXBench's tuned
block sizes, traced and analysed (perf/pallas_analysis.py) and estimated by perf/model.py, plus
the XLA work around it (MLA's projections, splash's repeated key heads) estimated as XLA. Both
sides include the host dispatch, as the table's perf_counter timings do. Prints a Markdown table
of estimated against measured times and ratios. Imports jax (tracing and AOT compiles only,
nothing runs).
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # other processes may hold libtpu

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu import flash_attention as flash
from jax.experimental.pallas.ops.tpu import matmul as tiled
from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks

from maxkernel_tui.kernels import aot
from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from maxkernel_tui.kernels.perf.model import DISPATCH_S, estimate
from maxkernel_tui.kernels.perf.pallas_analysis import (
    analyze,
    matmul_traffic,
    transcendental_elements,
)
from maxkernel_tui.kernels.perf.published import JAXBENCH_V6E, JaxbenchMeasurement
from maxkernel_tui.kernels.perf.xla_model import xla_seconds
from maxkernel_tui.kernels.targets import TARGETS, TpuTarget

BF16 = jnp.bfloat16
MASK = -0.7 * float(jnp.finfo(jnp.float32).max)


@dataclass(frozen=True)
class Workload:
    """One row: its inputs, XLA's program, the expert's program and the XLA work around it."""

    inputs: list[jax.ShapeDtypeStruct]
    xla: Callable[..., Any]
    expert: Callable[..., Any]
    glue: Callable[..., Any] | None = None  # the expert's XLA part, on the same inputs
    # the expert's own inputs where its harness lays them out otherwise (paged attention)
    expert_inputs: list[jax.ShapeDtypeStruct] | None = None


def _spec(*shape: int, dtype: Any = BF16) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype)


def _causal_softmax_attention(q: jax.Array, k: jax.Array, v: jax.Array, scale: float) -> jax.Array:
    """(batch, heads, seq, dim) causal attention as the baselines write it in jnp."""
    seq = q.shape[2]
    logits = jnp.einsum("bhqd,bhkd->bhqk", q, k) * scale
    logits = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), logits, MASK)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(logits, axis=-1), v)


def flash_workload() -> Workload:
    """Causal MHA, Llama-3.1-70B sized: batch 1, 64 heads, 2048 positions, head dim 128."""
    spec = _spec(1, 64, 2048, 128)
    sizes = flash.BlockSizes(block_q=2048, block_k_major=2048, block_k=1024, block_b=1)
    return Workload(
        [spec] * 3,
        functools.partial(_causal_softmax_attention, scale=128**-0.5),
        functools.partial(
            flash.flash_attention, causal=True, sm_scale=128**-0.5, block_sizes=sizes
        ),
    )


def _repeated_heads(k: jax.Array, v: jax.Array, group: int) -> tuple[jax.Array, jax.Array]:
    return jnp.repeat(k, group, axis=0), jnp.repeat(v, group, axis=0)


def _splash_workload(q_heads: int, kv_heads: int, seq: int) -> Workload:
    """Causal GQA through splash attention on (heads, seq, dim), key heads repeated first."""
    group = q_heads // kv_heads
    sizes = splash.BlockSizes(block_q=2048, block_kv=2048, block_kv_compute=1024)
    mask = masks.MultiHeadMask([masks.CausalMask((seq, seq))] * q_heads)
    kernel = splash.make_splash_mha_single_device(mask, block_sizes=sizes)

    def expert(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return kernel(q, *_repeated_heads(k, v, group))

    def xla(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        k, v = _repeated_heads(k, v, group)
        return _causal_softmax_attention(q[None], k[None], v[None], 128**-0.5)[0]

    return Workload(
        [_spec(q_heads, seq, 128), _spec(kv_heads, seq, 128), _spec(kv_heads, seq, 128)],
        xla,
        expert,
        lambda q, k, v: _repeated_heads(k, v, group),
    )


def paged_workload() -> Workload:
    """Decode over a paged cache: batch 32, 64 query and 8 key heads, 128 pages of 16 each. XLA's
    side is JAXBench's baseline as it is written (and was timed): per sequence, its pages gathered
    in (pages, page, key heads, dim) layout, the key heads repeated to every query head, a
    one-row attention. The expert's harness makes its pages key-head-major, as jax's kernel
    wants them, and times the kernel alone."""
    batch, q_heads, kv_heads, dim, page, pages = 32, 64, 8, 128, 16, 128
    seq = pages * page
    lengths, indices = _spec(batch, dtype=jnp.int32), _spec(batch, pages, dtype=jnp.int32)
    cache = _spec(batch * pages, page, kv_heads, dim)
    starts = _spec(batch + 1, dtype=jnp.int32)

    def xla(q, k_pages, v_pages, lengths, indices, starts):  # type: ignore[no-untyped-def]
        def one(s):  # type: ignore[no-untyped-def]
            query = jax.lax.dynamic_slice(q, (starts[s], 0, 0), (1, q_heads, dim))
            k, v = (
                jnp.repeat(p[indices[s]].reshape(seq, kv_heads, dim), q_heads // kv_heads, axis=1)
                for p in (k_pages, v_pages)
            )
            logits = jnp.einsum("qhd,khd->hqk", query, k) * dim**-0.5
            logits = jnp.where((jnp.arange(seq) < lengths[s])[None, None], logits, -1e30)
            return jnp.einsum("hqk,khd->qhd", jax.nn.softmax(logits, axis=-1), v)[0]

        return jax.vmap(one)(jnp.arange(batch))

    head_major = _spec(kv_heads, batch * pages, page, dim)
    return Workload(
        [_spec(batch, q_heads, dim), cache, cache, lengths, indices, starts],
        xla,
        functools.partial(paged_attention, pages_per_compute_block=pages),
        expert_inputs=[_spec(batch, q_heads, dim), head_major, head_major, lengths, indices],
    )


MLA = {"seq": 2048, "emb": 7168, "heads": 128, "q_rank": 1536, "kv_rank": 512, "nope": 128}


def _mla_projections(x, q_down, q_up, kv_down, k_up, v_up, *, rope_dtype):  # type: ignore[no-untyped-def]
    """MLA's low-rank projections with the rotary embedding on the last 64 dims of q and of the
    shared key: q, k (batch, heads, seq, 192) and v (batch, heads, seq, 128). The baseline rounds
    cos and sin to bf16; JAXBench's expert keeps them f32, which promotes q and k to f32."""
    seq, heads, rank, nope = MLA["seq"], MLA["heads"], MLA["kv_rank"], MLA["nope"]
    q = jnp.dot(jnp.dot(x, q_down), q_up).reshape(1, seq, heads, nope + 64)
    compressed = jnp.dot(x, kv_down)
    k_nope = jnp.dot(compressed[:, :, :rank], k_up).reshape(1, seq, heads, nope)
    angles = jnp.outer(jnp.arange(seq), 1.0 / 10000 ** (jnp.arange(0, 64, 2) / 64.0))
    cos, sin = (f(angles).astype(rope_dtype)[None, :, None, :] for f in (jnp.cos, jnp.sin))
    rope = jnp.broadcast_to(compressed[:, :, None, rank:], (1, seq, heads, 64))
    q = jnp.concatenate([q[..., :nope], _rotated(q[..., nope:], cos, sin)], axis=-1)
    k = jnp.concatenate([k_nope, _rotated(rope, cos, sin)], axis=-1)
    v = jnp.dot(compressed[:, :, :rank], v_up).reshape(1, seq, heads, nope)
    return (t.transpose(0, 2, 1, 3) for t in (q, k, v))


def _rotated(x, cos, sin):  # type: ignore[no-untyped-def]
    """The rotate-half rotary embedding of `x`'s last dim."""
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    return jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def mla_workload() -> Workload:
    """DeepSeek-V3's multi-head latent attention, batch 1, 2048 positions; the expert pads the
    192-wide heads to 256 for jax's flash attention."""
    seq, emb, heads, nope = MLA["seq"], MLA["emb"], MLA["heads"], MLA["nope"]
    inputs = [
        _spec(1, seq, emb),
        _spec(emb, MLA["q_rank"]),
        _spec(MLA["q_rank"], heads * (nope + 64)),
        _spec(emb, MLA["kv_rank"] + 64),
        _spec(MLA["kv_rank"], heads * nope),
        _spec(MLA["kv_rank"], heads * nope),
        _spec(heads * nope, emb),
    ]
    sizes = flash.BlockSizes(block_q=2048, block_k_major=2048, block_k=1024, block_b=1)

    def padded(*args):  # type: ignore[no-untyped-def]
        q, k, v = _mla_projections(*args[:6], rope_dtype=jnp.float32)
        pad = ((0, 0), (0, 0), (0, 0))
        return (
            jnp.pad(q, (*pad, (0, 64))),
            jnp.pad(k, (*pad, (0, 64))),
            jnp.pad(v, (*pad, (0, 128))),
        )

    def out_projection(attended, o_proj):  # type: ignore[no-untyped-def]
        return jnp.dot(attended.transpose(0, 2, 1, 3).reshape(1, seq, heads * nope), o_proj)

    def expert(*args):  # type: ignore[no-untyped-def]
        out = flash.flash_attention(
            *padded(*args), causal=True, sm_scale=192**-0.5, block_sizes=sizes
        )
        return out_projection(out[..., :nope], args[6])

    def xla(*args):  # type: ignore[no-untyped-def]
        q, k, v = _mla_projections(*args[:6], rope_dtype=BF16)
        return out_projection(_causal_softmax_attention(q, k, v, 192**-0.5), args[6])

    def glue(*args):  # type: ignore[no-untyped-def]
        q, k, v = padded(*args)  # the kernel's output takes q's dtype (f32 here)
        return q, k, out_projection(v[..., :nope].astype(q.dtype), args[6])

    return Workload(inputs, xla, expert, glue)


def gemm_workload() -> Workload:
    """Llama-3.1-70B's FFN matmul, 8192 x 8192 x 28672, through jax's tiled Pallas matmul."""
    return Workload(
        [_spec(8192, 8192), _spec(8192, 28672)],
        jnp.dot,
        functools.partial(tiled.matmul, block_shape=(1024, 2048), block_k=1024),
    )


WORKLOADS: dict[str, Callable[[], Workload]] = {
    "flash": flash_workload,
    "splash": functools.partial(_splash_workload, 64, 8, 2048),
    "gqa": functools.partial(_splash_workload, 128, 8, 2048),
    "paged": paged_workload,
    "mla": mla_workload,
    "gemm": gemm_workload,
}


def xla_cost(function: Callable[..., Any], inputs: list[Any], target: TpuTarget) -> ReferenceCost:
    """XLA's cost analysis for `target`, with the exponentials counted from the jaxpr."""
    program = jax.make_jaxpr(function)(*inputs)
    compiled = aot.compile_for_tpu(function, inputs, target)
    return ReferenceCost.from_xla(
        aot.cost_of(compiled), transcendental_elements(program), matmul_traffic(program)
    )


@dataclass(frozen=True)
class Row:
    measured: JaxbenchMeasurement
    xla_seconds: float
    expert_seconds: float

    @property
    def ratio(self) -> float:
        return self.xla_seconds / self.expert_seconds


def estimate_row(name: str, target: TpuTarget) -> Row:
    """Both sides of one workload, estimated (dispatch included once on each side)."""
    work = WORKLOADS[name]()
    measured = next(m for m in JAXBENCH_V6E if m.key == name)
    xla = DISPATCH_S + (xla_seconds(xla_cost(work.xla, work.inputs, target), target) or 0.0)
    kernels = analyze(jax.make_jaxpr(work.expert)(*(work.expert_inputs or work.inputs)))
    expert = estimate(kernels, target).seconds
    if work.glue is not None:
        expert += xla_seconds(xla_cost(work.glue, work.inputs, target), target) or 0.0
    return Row(measured, xla, expert)


def _residual(model: float, measured: float) -> str:
    return f"{model / measured - 1:+.0%}"


def table(rows: list[Row], target: TpuTarget) -> list[str]:
    lines = [
        f"Estimated on {target.name} by the model; measured by JAXBench on a TPU v6e-1 "
        "(priority_kernels/RESULTS.md).",
        "",
        "| workload (task) | XLA measured | XLA est. | resid. | expert measured | expert est. | "
        "resid. | ratio measured | ratio est. | resid. |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        m = row.measured
        xla, expert = row.xla_seconds * 1e3, row.expert_seconds * 1e3
        lines.append(
            f"| {m.workload} ({m.task}) | {m.xla_ms:.2f} ms | {xla:.2f} ms | "
            f"{_residual(xla, m.xla_ms)} | {m.expert_ms:.2f} ms | {expert:.2f} ms | "
            f"{_residual(expert, m.expert_ms)} | {m.ratio:.2f}x | {row.ratio:.2f}x | "
            f"{_residual(row.ratio, m.ratio)} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="v6e", choices=sorted(TARGETS))
    parser.add_argument("--only", help="comma-separated workloads: " + ",".join(WORKLOADS))
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(WORKLOADS)
    target = TARGETS[args.target]
    np.set_printoptions(precision=3)
    print("\n".join(table([estimate_row(name, target) for name in names], target)))


if __name__ == "__main__":
    main()
