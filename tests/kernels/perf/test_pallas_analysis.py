"""Static analysis of Pallas kernels against figures computed by hand."""

import functools
import json
import re

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels import aot
from maxkernel_tui.kernels.perf.analysis import KernelAnalysis
from maxkernel_tui.kernels.perf.model import warnings_for
from maxkernel_tui.kernels.perf.pallas_analysis import LANE_SHIFT_OPS, analyze
from maxkernel_tui.kernels.targets import MIB, TARGETS
from tests.support.kernels import load
from tests.support.paths import KERNELS

BF16, F32 = jnp.bfloat16, jnp.float32


def single(fn, *specs):
    kernels = analyze(jax.make_jaxpr(fn)(*specs))
    assert len(kernels) == 1
    # what crosses a process comes back the same
    assert KernelAnalysis.from_json(json.loads(json.dumps(kernels[0].to_json()))) == kernels[0]
    return kernels[0]


def test_tiled_gemm():
    gemm = load(KERNELS / "honest" / "8p_GEMM.py")
    k = single(
        gemm.computation,
        jax.ShapeDtypeStruct((8192, 8192), BF16),
        jax.ShapeDtypeStruct((8192, 28672), BF16),
    )
    assert k.grid == [8, 28, 16] and k.dimension_semantics == [
        "parallel",
        "parallel",
        "arbitrary",
    ]
    a, _b, out, acc = k.blocks
    assert (a.shape, a.fetches) == (
        [1024, 512],
        8 * 28 * 16,
    )  # k is innermost: a new A block every step
    assert (out.shape, out.fetches) == ([1024, 1024], 8 * 28)  # written back once per (i, j)
    assert acc.memory_space == "vmem" and acc.bytes == 1024 * 1024 * 4
    # double-buffered A, B and output blocks, plus the f32 accumulator
    assert (
        k.vmem_bytes
        == 2 * (1024 * 512 * 2 + 512 * 1024 * 2 + 1024 * 1024 * 2) + 1024 * 1024 * 4
        == 12 * MIB
    )
    assert k.hbm_bytes == 3584 * (1 * MIB + 1 * MIB) + 224 * 2 * MIB
    assert k.mxu_flops_per_step == 2 * 1024 * 1024 * 512 and k.mxu_f32_flops_per_step == 0


def test_row_wise_norm():
    norm = load(KERNELS / "honest" / "12p_RMSNorm.py")
    k = single(
        lambda x, s: norm.computation(x, s, 1e-5),
        jax.ShapeDtypeStruct((8, 4096, 8192), BF16),
        jax.ShapeDtypeStruct((8192,), BF16),
    )
    x, scale, _out = k.blocks
    assert k.steps == 256 and x.fetches == 256 and scale.fetches == 1  # scale stays resident
    assert k.vmem_bytes == 2 * (128 * 8192 * 2) * 2 + 2 * 8192 * 2
    assert k.hbm_bytes == 2 * 8 * 4096 * 8192 * 2 + 8192 * 2  # read x once, write y once
    # one rsqrt per row, on a (128, 1) column: 16 whole vregs
    assert k.mxu_flops_per_step == 0 and k.transcendentals_per_step == 128 * 128
    assert warnings_for(k, TARGETS["v5e"]) == []


def _gather_rows_kernel(ids_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def gather_rows(ids, x):
    """Scalar prefetch: the block read at step i is chosen by ids[i]."""
    return pl.pallas_call(
        _gather_rows_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(ids.shape[0],),
            in_specs=[pl.BlockSpec((8, 128), lambda i, ids: (ids[i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, ids: (i, 0)),
        ),
        out_shape=jax.ShapeDtypeStruct((ids.shape[0] * 8, 128), x.dtype),
    )(ids, x)


def test_scalar_prefetch_index_maps_give_an_upper_bound():
    k = single(
        gather_rows, jax.ShapeDtypeStruct((16,), jnp.int32), jax.ShapeDtypeStruct((256, 128), F32)
    )
    assert k.scalar_prefetch == 1 and not k.index_maps_exact
    assert [b.fetches for b in k.blocks] == [16, 16]
    assert any("upper bound" in w for w in warnings_for(k, TARGETS["v5e"]))


def gather_counted_rows(ids, count, x):
    """A grid as long as a traced count (megablox's active tiles): at most len(ids) steps."""
    return pl.pallas_call(
        _gather_rows_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(count,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, ids: (ids[i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, ids: (i, 0)),
        ),
        out_shape=jax.ShapeDtypeStruct((ids.shape[0] * 8, 128), x.dtype),
    )(ids, x)


def test_a_grid_extent_known_only_at_run_time_is_taken_at_the_prefetched_ids_length():
    k = single(
        lambda ids, x: gather_counted_rows(ids, jnp.sum(ids > 0), x),
        jax.ShapeDtypeStruct((12,), jnp.int32),
        jax.ShapeDtypeStruct((256, 128), F32),
    )
    assert k.grid == [12] and k.steps == 12
    assert [b.fetches for b in k.blocks] == [12, 12]


def _copy_from_hbm_kernel(x_hbm, o_ref, buffer, semaphore):
    copy = pltpu.make_async_copy(x_hbm, buffer, semaphore)
    copy.start()
    copy.wait()
    o_ref[...] = buffer[...]


def copy_from_hbm(x):
    return pl.pallas_call(
        _copy_from_hbm_kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA(())],
    )(x)


def test_manual_dma_input_left_in_hbm():
    k = single(copy_from_hbm, jax.ShapeDtypeStruct((512, 256), F32))
    spaces = [(b.role, b.memory_space) for b in k.blocks]
    assert ("input 0", "any") in spaces and ("scratch 1", "semaphore") in spaces
    assert (
        next(b for b in k.blocks if b.role == "input 0").fetches == 0
    )  # the kernel moves it itself


def test_over_vmem_tiling_is_flagged_before_compiling():
    blowup = load(KERNELS / "cheats" / "vmem_blowup.py")
    k = single(
        blowup.computation,
        jax.ShapeDtypeStruct((4096, 8192), F32),
        jax.ShapeDtypeStruct((8192, 8192), F32),
        jax.ShapeDtypeStruct((8192,), F32),
    )
    assert k.vmem_bytes > 128 * MIB
    assert any(
        "exceeds the 16 MiB default scoped VMEM of v5e: this tiling cannot compile" in w
        for w in warnings_for(k, TARGETS["v5e"])
    )


def _scratch_kernel(x_ref, o_ref, scratch):
    scratch[0:8, 0:128] = x_ref[...]
    o_ref[...] = scratch[0:8, 0:128]


@functools.cache
def _vmem_reported_by_libtpu(name):
    def oversized(x):
        return pl.pallas_call(
            _scratch_kernel,
            out_shape=jax.ShapeDtypeStruct((8, 128), F32),
            scratch_shapes=[pltpu.VMEM((16384, 16384), F32)],
        )(x)  # 1 GiB

    with pytest.raises(Exception) as caught:
        aot.compile_for_tpu(oversized, [jax.ShapeDtypeStruct((8, 128), F32)], TARGETS[name])
    found = re.search(r"would exceed memory \(size=(\d+)\)", str(caught.value))
    assert found, str(caught.value)[:500]
    return int(found.group(1))


@pytest.mark.slow  # compiles for every TPU generation
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_vmem_capacity_in_the_table_is_what_libtpu_reports(name):
    assert _vmem_reported_by_libtpu(name) == TARGETS[name].vmem_bytes


def _shifted_reads_kernel(x_ref, o_ref, *, lane, sublane):
    o_ref[...] = x_ref[pl.ds(sublane, 16), pl.ds(lane, 256)]


@pytest.mark.parametrize(
    ("lane", "sublane", "shifted"),
    [(0, 0, False), (128, 8, False), (3, 0, True), (0, 4, True), (130, 8, True)],
)
def test_a_read_off_the_vreg_tiling_costs_vector_work_per_element(lane, sublane, shifted):
    kernel = functools.partial(_shifted_reads_kernel, lane=lane, sublane=sublane)
    call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 256), F32))
    k = single(call, jax.ShapeDtypeStruct((32, 512), F32))
    assert k.vector_ops_per_step == (LANE_SHIFT_OPS * 16 * 256 if shifted else 0)


def _dynamic_read_kernel(x_ref, o_ref):
    start = pl.multiple_of(pl.program_id(0) * 128, 128)
    o_ref[...] = x_ref[:, pl.ds(start, 128)]


def test_a_read_at_a_dynamic_offset_is_taken_as_aligned():
    call = pl.pallas_call(
        _dynamic_read_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((8, 256), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, i)),
        out_shape=jax.ShapeDtypeStruct((8, 256), F32),
    )
    assert single(call, jax.ShapeDtypeStruct((8, 256), F32)).vector_ops_per_step == 0


def _column_kernel(x_ref, o_ref):
    total = jnp.sum(x_ref[...], axis=1, keepdims=True)  # reads (64, 512)
    o_ref[...] = jnp.exp(total * 2.0)  # two operations on a (64, 1) column


def test_vector_work_counts_whole_vregs_and_a_reduction_its_operand():
    call = pl.pallas_call(_column_kernel, out_shape=jax.ShapeDtypeStruct((64, 1), F32))
    k = single(call, jax.ShapeDtypeStruct((64, 512), F32))
    column = 64 * 128  # a (64, 1) column fills 8 vregs, one lane of each used
    assert k.vector_ops_per_step == 64 * 512 + 2 * column  # the sum, keepdims, the multiply
    assert k.transcendentals_per_step == column


@pytest.mark.parametrize(("power", "operations"), [(2, 1), (3, 2), (4, 2), (7, 4), (-2, 2)])
def test_a_power_costs_its_multiplies_by_squaring(power, operations):
    call = pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(..., jax.lax.integer_pow(x_ref[...], power)),
        out_shape=jax.ShapeDtypeStruct((8, 128), F32),
    )
    k = single(call, jax.ShapeDtypeStruct((8, 128), F32))
    assert k.vector_ops_per_step == operations * 8 * 128


def _ring_read_kernel(x_ref, o_ref):
    slot = pl.program_id(0) % 2
    o_ref[...] = x_ref.at[slot][:, pl.ds(1, 128)]  # a dynamic plane, a static lane shift


def test_a_shifted_read_through_a_view_of_a_ref_counts_its_last_window():
    call = pl.pallas_call(
        _ring_read_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((2, 8, 256), lambda i: (0, 0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((8, 128), F32),
    )
    k = single(call, jax.ShapeDtypeStruct((2, 8, 256), F32))
    assert k.vector_ops_per_step == LANE_SHIFT_OPS * 8 * 128


def _value_slice_kernel(x_ref, o_ref, *, start):
    o_ref[...] = x_ref[...][:, start : start + 128]  # a slice of a loaded value, not of the ref


@pytest.mark.parametrize(("start", "shifted"), [(0, False), (128, False), (30, True)])
def test_a_slice_of_a_value_off_the_lane_tiling_costs_vector_work(start, shifted):
    kernel = functools.partial(_value_slice_kernel, start=start)
    call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), F32))
    k = single(call, jax.ShapeDtypeStruct((8, 384), F32))
    assert k.vector_ops_per_step == (LANE_SHIFT_OPS * 8 * 128 if shifted else 0)
