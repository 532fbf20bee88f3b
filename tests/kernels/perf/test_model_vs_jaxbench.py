"""The performance model against JAXBench's measured v6e table (benchmarks/model_vs_jaxbench.py):
every row within 25% (flash, splash, GQA, paged and MLA attention and the dense GEMM: XLA's
time, the expert's and their ratio), and the pieces the check rests on: a loop inside a kernel
body counts as often as it runs, a transposed matmul's N is read from the right axis, XLA's
exponentials are counted from the jaxpr and cost vector time, v6e's vector units reach a smaller
share of its peak than v5e's, XLA's matmuls each take their own time beside the rest of the
program, and a matmul streams an operand XLA broadcast into it at its broadcast size."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from maxkernel_tui.kernels.perf.pallas_analysis import (
    CONVOLUTION_MXU_SHARE,
    analyze,
    matmul_traffic,
    transcendental_elements,
)
from maxkernel_tui.kernels.perf.vector_rates import vector_rates
from maxkernel_tui.kernels.perf.xla_model import (
    XLA_EFFICIENCY,
    XLA_OPS_PER_TRANSCENDENTAL,
    XLA_PRECISIONS,
    XLA_VECTOR_SHARES,
    xla_seconds,
)
from maxkernel_tui.kernels.targets import TARGETS

BOUND = 0.25
F32 = jnp.float32


def _looped_kernel(q_ref, k_ref, o_ref, *, steps):
    @pl.loop(0, steps)
    def _step(i):
        o_ref[...] += jax.lax.dot_general(
            q_ref[...], k_ref[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
        )


def test_a_loop_in_the_body_counts_its_matmul_each_time_and_reads_n_from_the_transposed_rhs():
    q, k = (
        jax.ShapeDtypeStruct((256, 128), jnp.bfloat16),
        jax.ShapeDtypeStruct((512, 128), jnp.bfloat16),
    )

    def program(q, k):
        return pl.pallas_call(
            functools.partial(_looped_kernel, steps=4),
            out_shape=jax.ShapeDtypeStruct((256, 512), jnp.float32),
        )(q, k)

    (kernel,) = analyze(jax.make_jaxpr(program)(q, k))
    assert kernel.mxu_flops_per_step == 4 * 2.0 * 256 * 512 * 128
    assert kernel.matmul_dims == [[256, 128, 512]]


def _copying_kernel(x_hbm, o_ref, buffer, semaphore):
    copy = pltpu.make_async_copy(x_hbm, buffer, semaphore)
    copy.start()
    copy.wait()
    o_ref[...] = buffer[...] * 2


def test_an_operand_the_body_copies_itself_is_read_once_with_one_dma_start_per_step():
    spec = jax.ShapeDtypeStruct((64, 128), jnp.float32)

    def program(x):
        return pl.pallas_call(
            _copying_kernel,
            out_shape=spec,
            grid=(4,),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((64, 128), lambda i: (0, 0)),
            scratch_shapes=[pltpu.VMEM((64, 128), jnp.float32), pltpu.SemaphoreType.DMA],
        )(x)

    (kernel,) = analyze(jax.make_jaxpr(program)(spec))
    assert kernel.dma_starts_per_step == 1
    assert kernel.hbm_bytes == 64 * 128 * 4 * 2  # the copied operand once, the output once


def test_xla_exponentials_are_counted_from_the_jaxpr_and_cost_vector_time():
    spec = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    assert transcendental_elements(jax.make_jaxpr(jax.nn.softmax)(spec)) == 8 * 128
    v6e = TARGETS["v6e"]
    plain = ReferenceCost(flops=1e9, bytes_accessed=1e6)
    softmax = ReferenceCost(flops=1e9, bytes_accessed=1e6, transcendentals=1e8)
    added = xla_seconds(softmax, v6e) - xla_seconds(plain, v6e)  # type: ignore[operator]
    fitted_rate = v6e.peak_bf16_flops * XLA_VECTOR_SHARES["v6e"]
    assert added == pytest.approx(1e8 * XLA_OPS_PER_TRANSCENDENTAL / fitted_rate / 0.95)


def test_a_matmul_streams_an_operand_broadcast_into_it_at_its_broadcast_size():
    # grouped attention's key heads repeated to every query head (JAXBench's paged baseline):
    # XLA fuses the repeat into the dot, its cost analysis counts the 8 key heads once
    q = jax.ShapeDtypeStruct((64, 1, 128), jnp.bfloat16)
    k = jax.ShapeDtypeStruct((8, 2048, 128), jnp.bfloat16)

    def scores(q, k):
        return jnp.einsum("hqd,hkd->hqk", q, jnp.repeat(k, 8, axis=0))

    ((flops, streamed, counted, share),) = matmul_traffic(jax.make_jaxpr(scores)(q, k))
    query, keys, out = 64 * 128 * 2, 8 * 2048 * 128 * 2, 64 * 2048 * 2
    assert flops == 2.0 * 64 * 2048 * 128
    assert (streamed, counted, share) == (query + 8 * keys + out, query + keys + out, 1.0)
    plain = matmul_traffic(jax.make_jaxpr(jnp.matmul)(k, jax.ShapeDtypeStruct((128, 256), F32)))
    assert plain[0][1] == plain[0][2]  # nothing broadcast: streamed as counted


def test_xla_matmuls_take_their_own_time_beside_the_rest_of_the_program():
    # XLA runs fusions one after another: a compute-bound matmul does not hide another fusion's
    # traffic (MLA's projections beside its transposes and pads)
    v6e = TARGETS["v6e"]
    matmul = [1e12, 1e8, 1e8]  # 1.09 ms of MXU work, its own bytes hidden under it
    cost = ReferenceCost(flops=1e12, bytes_accessed=1e8 + 1.64e9, matmuls=[matmul])
    expected = (1e12 / v6e.peak_bf16_flops + 1.64e9 / v6e.hbm_bandwidth) / XLA_EFFICIENCY
    assert xla_seconds(cost, v6e) == pytest.approx(expected)
    as_one = ReferenceCost(flops=1e12, bytes_accessed=1e8 + 1.64e9)  # a stored cost: one fusion
    assert xla_seconds(as_one, v6e) == pytest.approx(
        max(1e12 / v6e.peak_bf16_flops, 1.74e9 / v6e.hbm_bandwidth) / XLA_EFFICIENCY
    )
    # the re-reads of a broadcast operand are the matmul's own traffic
    reread = ReferenceCost(flops=1e9, bytes_accessed=2e8, matmuls=[[1e9, 1.6e9, 2e8]])
    assert xla_seconds(reread, v6e) == pytest.approx(1.6e9 / v6e.hbm_bandwidth / XLA_EFFICIENCY)


def test_a_convolution_is_a_fusion_of_its_own_at_the_share_of_the_mxu_xla_reaches():
    # 22k's shapes: NCHW image, OIHW kernel, VALID; its MXU work scales with the passes
    image = jax.ShapeDtypeStruct((128, 64, 128, 128), F32)
    kernel = jax.ShapeDtypeStruct((128, 64, 3, 3), F32)

    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "VALID")

    ((flops, streamed, counted, share),) = matmul_traffic(jax.make_jaxpr(conv)(image, kernel))
    out = 128 * 128 * 126 * 126
    assert flops == 2.0 * out * 64 * 9
    assert streamed == counted == 4.0 * (128 * 64 * 128 * 128 + 128 * 64 * 9 + out)
    assert share == CONVOLUTION_MXU_SHARE
    v5e = TARGETS["v5e"]
    cost = ReferenceCost(
        flops=flops, bytes_accessed=counted, matmuls=[[flops, streamed, counted, share]]
    )
    one, three = (xla_seconds(cost, v5e, XLA_PRECISIONS[p]) for p in (1, 3))
    assert one == pytest.approx(streamed / v5e.hbm_bandwidth / XLA_EFFICIENCY)  # HBM-bound
    assert three == pytest.approx(3 * flops / v5e.peak_bf16_flops / share / XLA_EFFICIENCY)
    # XLA fused the consumer (a global mean) into it: no output written, as its bytes say
    fused = ReferenceCost(
        flops=flops, bytes_accessed=5e8, matmuls=[[flops, streamed, counted, share]]
    )
    assert xla_seconds(fused, v5e) == pytest.approx(
        max(flops / v5e.peak_bf16_flops / share, 5e8 / v5e.hbm_bandwidth) / XLA_EFFICIENCY
    )


def test_the_larger_of_the_cost_analysis_and_jaxpr_transcendental_counts_holds():
    # a TPU's cost analysis counted a rotary embedding's cos and sin, not the softmax's exps
    cost = {"flops": 1.0, "bytes accessed": 1.0, "transcendentals": 2.6e5}
    assert ReferenceCost.from_xla(cost, 5.4e8).transcendentals == 5.4e8
    assert ReferenceCost.from_xla({"flops": 1.0}, None).transcendentals is None


def test_v6e_vector_units_reach_a_smaller_share_of_its_peak_than_v5e():
    v5e, v6e = TARGETS["v5e"], TARGETS["v6e"]
    assert vector_rates(v6e)[0] / v6e.peak_bf16_flops < vector_rates(v5e)[0] / v5e.peak_bf16_flops


@pytest.fixture(scope="module")
def benchmark():
    path = Path(__file__).parents[3] / "benchmarks" / "model_vs_jaxbench.py"
    spec = importlib.util.spec_from_file_location("model_vs_jaxbench", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["model_vs_jaxbench"] = module
    spec.loader.exec_module(module)
    return module


# Every row holds on every column: XLA's time, the expert's and their ratio.
HELD = {
    name: ("xla", "expert", "ratio") for name in ("flash", "splash", "gqa", "gemm", "paged", "mla")
}


@pytest.mark.slow  # ahead-of-time compiles for v6e: seconds each
@pytest.mark.parametrize("workload", sorted(HELD))
def test_the_model_lands_within_25_percent_of_jaxbench_on_v6e(benchmark, workload):
    row = benchmark.estimate_row(workload, TARGETS["v6e"])
    measured = row.measured
    residuals = {
        "xla": row.xla_seconds * 1e3 / measured.xla_ms - 1,
        "expert": row.expert_seconds * 1e3 / measured.expert_ms - 1,
        "ratio": row.ratio / measured.ratio - 1,
    }
    assert all(abs(residuals[side]) <= BOUND for side in HELD[workload]), residuals
