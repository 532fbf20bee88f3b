"""A sampled pallas_call bound over compact operands (evaluation/tiles/compact.py) gives bitwise
the values the same sample gives over the production operands, and the interpreter is handed
only the sampled blocks. In-process jax, small shapes (seconds)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels.evaluation.tiles import compact, kernel_run
from maxkernel_tui.kernels.evaluation.tiles import memory as tiles_memory
from maxkernel_tui.kernels.evaluation.tiles.sampled_run import NotSampleable, run_sampled
from tests.support.mxu import mxu_exact
from tests.support.placed_tiles import placed

PARAMS = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
B = 128
BLOCK_BYTES = B * B * 4


def _run(monkeypatch, program, inputs, *, whole=False, seed=0, blocks=3):
    """The sampled run of `program`, compact or (whole=True) over the production operands, as
    before compact.py, and the Compacted of each kernel."""
    made: list[compact.Compacted] = []

    def recording(*args):
        compacted = compact.compact_call(*args)
        if whole:
            outputs = [(None, aval) for _, aval in compacted.outputs]
            params = args[2]
            compacted = compact.Compacted(args[3], params, outputs, 0, 0, ())
        made.append(compacted)
        return compacted

    monkeypatch.setattr(kernel_run, "compact_call", recording)
    sampled = run_sampled(
        jax.make_jaxpr(program)(*inputs),
        list(inputs),
        np.random.default_rng(seed),
        random_blocks=blocks,
        params=PARAMS,
    )
    return sampled, made


def _same_as_whole(monkeypatch, program, inputs, **kw):
    sampled, made = _run(monkeypatch, program, inputs, **kw)
    # each kernel runs twice (tiles/poison.py): poisoned on the sample, then state flowing on
    # two blocks of each class of it, on no more operands
    poisoned, natural = made[0::2], made[1::2]
    for whole, part in zip(poisoned, natural, strict=True):
        assert part.operand_bytes <= whole.operand_bytes
        assert part.output_bytes <= whole.output_bytes
    made = poisoned
    before, _ = _run(monkeypatch, program, inputs, whole=True, **kw)
    for now, then in zip(sampled.decided, before.decided, strict=True):
        assert now.shape == then.shape and now.values.dtype == then.values.dtype
        np.testing.assert_array_equal(now.indices, then.indices)
        assert now.indices.size
        # bitwise
        np.testing.assert_array_equal(now.values.view(np.uint8), then.values.view(np.uint8))
    return sampled, made


def _gemm_kernel(x_ref, w_ref, o_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _write():
        o_ref[...] = acc_ref[...] + pl.program_id(0) * 1000.0 + pl.num_programs(0) * 1e5


def _gemm(x, w):
    m, depth = x.shape
    n = w.shape[1]
    return pl.pallas_call(
        _gemm_kernel,
        grid=(pl.cdiv(m, B), n // B, depth // B),
        in_specs=[
            pl.BlockSpec((B, B), lambda i, j, k: (i, k)),
            pl.BlockSpec((B, B), lambda i, j, k: (k, j)),
        ],
        out_specs=pl.BlockSpec((B, B), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        scratch_shapes=[pltpu.VMEM((B, B), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
    )(x, w)


def _gemm_inputs(rows=512):
    """Small integers: every product and sum is exact in f32, so the bitwise comparisons do not
    hang on the order in which the CPU's dot sums a block (it varies with its threads)."""
    x = jax.random.randint(jax.random.key(0), (rows, 384), -4, 5).astype(jnp.float32)
    w = jax.random.randint(jax.random.key(1), (384, 640), -4, 5).astype(jnp.float32)
    return x, w


def test_a_gemm_with_a_reduction_is_handed_only_the_sampled_rows_and_columns(monkeypatch):
    x, w = _gemm_inputs()
    sampled, (made,) = _same_as_whole(monkeypatch, lambda x, w: _gemm(x, w) * 2.0, (x, w))
    (kernel,) = sampled.kernels
    rows, cols = np.nonzero(sampled.decided[0].mask())
    blocks = {(int(r) // B, int(c) // B) for r, c in zip(rows, cols, strict=True)}
    assert len(blocks) == kernel.blocks == 7  # of 20
    # x: every depth block of each sampled row; w: of each sampled column; one slot per block
    row_blocks, col_blocks = {i for i, _ in blocks}, {j for _, j in blocks}
    depth = 3
    assert made.operand_bytes == (len(row_blocks) + len(col_blocks)) * depth * BLOCK_BYTES
    assert made.output_bytes == len(blocks) * BLOCK_BYTES
    assert made.operand_bytes + made.output_bytes < 0.7 * (x.nbytes + w.nbytes + 512 * 640 * 4)
    assert made.whole == ()


def test_a_partial_last_block_reads_what_interpret_mode_pads_it_with(monkeypatch):
    """448 rows in blocks of 128: the last row block holds 64 rows and 64 of padding (NaN), which
    the kernel reads; placed back, only the 64 rows inside the array are kept."""
    x, w = _gemm_inputs(rows=448)

    def program(x, w):
        return _gemm(x, w) * 2.0

    sampled, _ = _same_as_whole(monkeypatch, program, (x, w), blocks=6)
    decided, output = placed(sampled.decided[0])
    assert decided[447].any()  # the partial last block was sampled (a corner)
    with pltpu.force_tpu_interpret_mode(PARAMS):
        full = np.asarray(jax.jit(program)(x, w))
    # f32 sums of the same exact products (the sample takes the matmul's operands as bf16, as
    # the MXU does; the inputs are exact in bf16), in another order: equal to f32's rounding
    np.testing.assert_allclose(output[decided], full[decided], rtol=1e-6)


def _batched_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 3.0 + pl.program_id(0)


def _batched(x):
    batch, rows, cols = x.shape
    return pl.pallas_call(
        _batched_kernel,
        grid=(batch, pl.cdiv(rows, B)),
        in_specs=[pl.BlockSpec((None, B, cols), lambda b, i: (b, i, 0))],
        out_specs=pl.BlockSpec((None, B, cols), lambda b, i: (b, i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
    )(x)


def test_squeezed_dimensions_stack_one_block_per_slot(monkeypatch):
    x = mxu_exact(
        jax.random.normal(jax.random.key(2), (6, 200, 128), jnp.float32)
    )  # a partial row block
    sampled, (made,) = _same_as_whole(monkeypatch, _batched, (x,), blocks=2)
    slots = sampled.kernels[0].blocks
    assert made.operand_bytes == made.output_bytes == slots * B * 128 * 4
    assert made.args[0].shape == (slots, B, 128)


def _gather_kernel(s_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...] + s_ref[pl.program_id(0)].astype(jnp.float32)


def _gathered(s, x):
    return pl.pallas_call(
        _gather_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(s.shape[0],),
            in_specs=[pl.BlockSpec((B, 128), lambda i, s: (s[i], 0))],
            out_specs=pl.BlockSpec((B, 128), lambda i, s: (i, 0)),
        ),
        out_shape=jax.ShapeDtypeStruct((s.shape[0] * B, 128), jnp.float32),
    )(s, x)


def test_scalar_prefetch_stays_whole_and_a_block_read_by_several_samples_is_gathered_once(
    monkeypatch,
):
    s = jnp.array([0, 0, 1, 1, 0, 2, 2, 0, 1, 0, 0, 2, 1, 1, 0, 2], jnp.int32)
    x = mxu_exact(jax.random.normal(jax.random.key(3), (4 * B, 128), jnp.float32))
    sampled, (made,) = _same_as_whole(monkeypatch, _gathered, (s, x), blocks=6)
    rows = np.nonzero(sampled.decided[0].mask().any(axis=1))[0]
    visited = sorted({int(r) // B for r in rows})
    read = {int(s[i]) for i in visited}
    assert len(visited) == 8 and len(read) < len(visited)
    assert made.operand_bytes == s.nbytes + len(read) * B * 128 * 4
    assert made.output_bytes == len(visited) * B * 128 * 4


def _dma_kernel(x_hbm, o_ref, buffer, semaphore):
    copy = pltpu.make_async_copy(x_hbm.at[pl.ds(pl.program_id(0) * B, B)], buffer, semaphore)
    copy.start()
    copy.wait()
    o_ref[...] = buffer[...] * 2.0


def _dma(x):
    return pl.pallas_call(
        _dma_kernel,
        grid=(x.shape[0] // B,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((B, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
        scratch_shapes=[pltpu.VMEM((B, 128), jnp.float32), pltpu.SemaphoreType.DMA],
    )(x)


def test_an_input_the_kernel_reads_by_dma_stays_whole_and_says_so(monkeypatch):
    x = mxu_exact(jax.random.normal(jax.random.key(4), (8 * B, 128), jnp.float32))
    sampled, (made,) = _same_as_whole(monkeypatch, _dma, (x,), blocks=2)
    assert made.operand_bytes == x.nbytes
    assert made.output_bytes == sampled.kernels[0].blocks * B * 128 * 4
    (why,) = made.whole
    assert "memory space any" in why
    assert "whole, not compact: " in sampled.kernels[0].describe()


def test_a_kernel_that_fits_compact_is_run_and_one_that_does_not_is_refused(monkeypatch):
    """Before, the interpreter was handed the production operands, and the room that a compact
    run needs refused this kernel (its production buffers need 2.5 times their 2.9 MiB)."""
    x, w = _gemm_inputs()
    program = jax.make_jaxpr(jax.jit(_gemm))(x, w)  # the kernel inside a call
    production = x.nbytes + w.nbytes + 512 * 640 * 4
    # 7 of 20 output blocks: 7 compact rows and columns of depth blocks, 7 output blocks, all
    # under 2.5 MiB, and the output at production shape (1.25 MiB)
    room = tiles_memory.MARGIN + 2.5 * production - 2**20
    monkeypatch.setattr(tiles_memory, "memory_room", lambda: room)
    sampled = run_sampled(program, [x, w], np.random.default_rng(0), random_blocks=3, params=PARAMS)
    assert sampled.decided_elements > 0
    monkeypatch.setattr(tiles_memory, "memory_room", lambda: tiles_memory.MARGIN + 3 * 2**20)
    with pytest.raises(NotSampleable, match=r"_gemm_kernel's sampled operands .* need about"):
        run_sampled(program, [x, w], np.random.default_rng(0), random_blocks=3, params=PARAMS)
    # not even its output at production shape fits: refused before any kernel runs
    monkeypatch.setattr(tiles_memory, "memory_room", lambda: tiles_memory.MARGIN + 2**20)
    with pytest.raises(NotSampleable, match=r"_gemm_kernel's production outputs \(0.0 GiB\)"):
        run_sampled(program, [x, w], np.random.default_rng(0), random_blocks=3, params=PARAMS)


def test_a_kernel_whose_outputs_are_the_program_outputs_never_makes_them_whole(monkeypatch):
    """The direct program's output is read from the compact run: a room that its 10 MiB output
    at production shape (twice, with the provenance pass) would not fit runs it, and its values
    are a whole run's; the same kernel inside a call (outputs placed back) is refused there."""
    x, w = _gemm_inputs(rows=4096)
    monkeypatch.setattr(tiles_memory, "memory_room", lambda: tiles_memory.MARGIN + 7 * 2**20)
    direct = jax.make_jaxpr(_gemm)(x, w)
    sampled = run_sampled(direct, [x, w], np.random.default_rng(0), random_blocks=3, params=PARAMS)
    decided, output = placed(sampled.decided[0])
    assert 0 < decided.sum() < decided.size
    with pltpu.force_tpu_interpret_mode(PARAMS):
        full = np.asarray(jax.jit(_gemm)(x, w))
    np.testing.assert_array_equal(output[decided], full[decided])
    inside = jax.make_jaxpr(jax.jit(_gemm))(x, w)
    with pytest.raises(NotSampleable, match=r"_gemm_kernel's production outputs \(0.0 GiB\)"):
        run_sampled(inside, [x, w], np.random.default_rng(0), random_blocks=3, params=PARAMS)


def test_the_slot_table_maps_every_sampled_point_to_its_block():
    starts = np.array([[0, 0], [128, 0]])
    slots = compact._Slots(starts, (128, 128), np.array([[0, 1]], np.int32))
    assert slots.compact_shape() == (256, 128)
    production, place = slots.cut(1, (200, 128))  # a partial block: 72 rows inside the array
    assert production == (slice(128, 200), slice(0, 128))
    assert place == (slice(128, 200), slice(0, 128))
    assert math.prod(slots.compact_shape()) * 4 == 2 * BLOCK_BYTES
