"""The performance model on the two cases whose answer is known: a memory-bound copy and a
compute-bound GEMM."""

import functools

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from maxkernel_tui.kernels.perf.model import (
    DISPATCH_S,
    STEP_OVERHEAD_S,
    estimate,
    vmem_limit,
    warnings_for,
)
from maxkernel_tui.kernels.perf.pallas_analysis import analyze
from maxkernel_tui.kernels.perf.vector_rates import vector_rates
from maxkernel_tui.kernels.perf.xla_model import XLA_EFFICIENCY
from maxkernel_tui.kernels.targets import TARGETS
from tests.support.kernels import load
from tests.support.paths import KERNELS


def _double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def untiled_double(x):
    return pl.pallas_call(_double_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


@pytest.mark.parametrize("name", ["v5e", "v6e"])
def test_untiled_elementwise_kernel_costs_bytes_over_bandwidth(name):
    target = TARGETS[name]
    kernels = analyze(
        jax.make_jaxpr(untiled_double)(jax.ShapeDtypeStruct((2048, 2048), jnp.float32))
    )
    result = estimate(kernels, target)
    moved = 2 * 2048 * 2048 * 4
    assert result.hbm_bytes == moved and result.bound == "memory"
    # bytes / bandwidth, plus the stated overheads: dispatch, one grid step, element-wise work
    assert (
        moved / target.hbm_bandwidth + DISPATCH_S
        <= result.seconds
        <= moved / target.hbm_bandwidth * 1.05 + STEP_OVERHEAD_S + DISPATCH_S
    )


@pytest.mark.parametrize("name", ["v5e", "v6e"])
def test_large_bf16_gemm_is_compute_bound_near_peak_on_v5e(name):
    gemm = load(KERNELS / "honest" / "8p_GEMM.py")
    jaxpr = jax.make_jaxpr(gemm.computation)(
        jax.ShapeDtypeStruct((8192, 8192), jnp.bfloat16),
        jax.ShapeDtypeStruct((8192, 28672), jnp.bfloat16),
    )
    target = TARGETS[name]
    reference = ReferenceCost(
        flops=2 * 8192 * 8192 * 28672,
        bytes_accessed=2 * (8192 * 8192 + 2 * 8192 * 28672),
        optimal_seconds=0.0195,
    )
    result = estimate(analyze(jaxpr), target, reference)
    achieved = result.flops / result.seconds
    if (
        name == "v5e"
    ):  # 1024x1024 tiles: 1 GFLOP per 2 MiB step, far above v5e's 240 flop/byte balance
        assert result.bound == "compute" and achieved >= 0.9 * target.peak_bf16_flops
        assert 0.9 <= result.roofline_share <= 1.0
    else:  # v6e's higher flop/byte balance makes the same tiling memory-bound: the model says so
        assert result.bound == "memory" and achieved < 0.9 * target.peak_bf16_flops
    # XLA's side: its flops at the MXU peak, at XLA's efficiency, plus the same dispatch
    xla = reference.flops / target.peak_bf16_flops / XLA_EFFICIENCY + DISPATCH_S
    assert result.kind == "estimated" and result.speedup == pytest.approx(xla / result.seconds)


def _row_sums(x_ref, o_ref):
    sums = jnp.sum(x_ref[...], axis=1, keepdims=True)
    o_ref[...] = jnp.broadcast_to(sums, o_ref.shape)


def row_sums(x, rows, out_lanes):
    """Sums of rows in blocks of `rows`: the output block is (rows, out_lanes) of (M, out_lanes)
    when out_lanes is 1, a slice of a wider output otherwise."""
    m, n = x.shape
    return pl.pallas_call(
        _row_sums,
        grid=(m // rows,),
        in_specs=[pl.BlockSpec((rows, n), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((rows, out_lanes), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((m, 1 if out_lanes == 1 else 4 * out_lanes), x.dtype),
    )(x)


def lowering_warnings(rows, out_lanes):
    x = jax.ShapeDtypeStruct((4096, 512), jnp.float32)
    jaxpr = jax.make_jaxpr(lambda a: row_sums(a, rows, out_lanes))(x)
    (kernel,) = analyze(jaxpr)
    return [w for w in warnings_for(kernel, TARGETS["v5e"]) if "cannot lower" in w]


def test_a_block_one_lane_wide_of_a_one_lane_array_is_not_said_to_fail_lowering():
    """[256, 1] of [4096, 1]: 256 rows are whole tiles of 8, the one lane is the array's own
    (tpu_lower and tpu_compile pass the same kernel)."""
    assert lowering_warnings(256, 1) == []


def test_a_block_neither_tiled_nor_whole_in_one_dim_is_said_to_fail_lowering():
    """[256, 64] of [4096, 256]: 64 lanes are neither a multiple of 128 nor the array's 256;
    [12, 1] of [4096, 1]: 12 rows are neither a multiple of 8 nor the array's 4096 (the input
    block [12, 512] too)."""
    (warning,) = lowering_warnings(256, 64)
    assert "output 0 block [256, 64] of [4096, 256]" in warning
    assert [w.split(":")[0] for w in lowering_warnings(12, 1)] == [
        "input 0 block [12, 512] of [4096, 512]",
        "output 0 block [12, 1] of [4096, 1]",
    ]


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def blocked_copy(x, vmem_limit_bytes=None):
    """(2048, 1024) f32 blocks: 8 MiB each, 32 MiB double-buffered in and out."""
    return pl.pallas_call(
        _copy_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // 2048,),
        in_specs=[pl.BlockSpec((2048, 1024), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((2048, 1024), lambda i: (i, 0)),
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=vmem_limit_bytes),
    )(x)


def test_vmem_fits_against_the_default_scoped_limit_unless_the_kernel_raises_it():
    # Mosaic holds a kernel to the default scoped VMEM (16 MiB on v5e, 32 MiB on v6e), not the
    # chip's 128 MiB, unless its compiler params raise vmem_limit_bytes.
    spec = jax.ShapeDtypeStruct((8192, 1024), jnp.float32)
    (plain,) = analyze(jax.make_jaxpr(blocked_copy)(spec))
    assert plain.vmem_bytes == 32 * 2**20
    v5e, v6e = TARGETS["v5e"], TARGETS["v6e"]
    assert vmem_limit(plain, v5e) == 16 * 2**20 and vmem_limit(plain, v6e) == 32 * 2**20
    found = estimate([plain], v5e)
    assert not found.fits_vmem and found.vmem_capacity == 16 * 2**20
    assert estimate([plain], v6e).fits_vmem
    assert any(
        "exceeds the 16 MiB default scoped VMEM of v5e" in w and "raise vmem_limit_bytes" in w
        for w in warnings_for(plain, v5e)
    )
    raised = functools.partial(blocked_copy, vmem_limit_bytes=64 * 2**20)
    (asked,) = analyze(jax.make_jaxpr(raised)(spec))
    assert vmem_limit(asked, v5e) == 64 * 2**20
    assert estimate([asked], v5e).fits_vmem
    assert not any("VMEM" in w for w in warnings_for(asked, v5e))


def _gelu_kernel(x_ref, o_ref, *, tanh_count):
    value = x_ref[...]
    for _ in range(tanh_count):
        value = jnp.tanh(value) * 0.999 + 0.001  # two VPU operations beside each tanh
    o_ref[...] = value


@pytest.mark.parametrize("tanh_count", [1, 4])
def test_a_step_takes_the_longer_of_its_vpu_and_eup_work_not_their_sum(tanh_count):
    # measured on a v5e (benchmarks/mxu_rows.py): a multiply-add beside each tanh costs nothing
    # more than the tanh alone; the VPU works while the EUP does
    target = TARGETS["v5e"]
    vpu, eup = vector_rates(target)
    call = pl.pallas_call(
        functools.partial(_gelu_kernel, tanh_count=tanh_count),
        grid=(64,),
        in_specs=[pl.BlockSpec((512, 2048), lambda i: (0, 0))],  # resident: fetched once
        out_specs=pl.BlockSpec((512, 2048), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((512, 2048), jnp.float32),
    )
    (kernel,) = analyze(jax.make_jaxpr(call)(jax.ShapeDtypeStruct((512, 2048), jnp.float32)))
    elements = 512 * 2048
    assert kernel.transcendentals_per_step == tanh_count * elements
    assert kernel.vector_ops_per_step == 2 * tanh_count * elements
    result = estimate([kernel], target)
    eup_seconds = 64 * tanh_count * elements / eup
    both = eup_seconds + 64 * 2 * tanh_count * elements / vpu
    assert eup_seconds < result.seconds - DISPATCH_S < both
