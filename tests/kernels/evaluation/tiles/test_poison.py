"""No state across output blocks (evaluation/tiles/poison.py): a kernel that leaves something in
scratch or in its output buffers for the next output block is wrong when the parallel axes are
split across cores, and exact on any sample; it is rejected. Accumulators over reduction axes,
flash attention's running statistics and scans along `arbitrary` output axes (checked through
their prefixes) are still accepted. In-process jax, small grids (seconds); one harness test."""

import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.evaluation.tiles import poison
from maxkernel_tui.kernels.evaluation.tiles.sampled_run import (
    KernelFault,
    NotSampleable,
    run_sampled,
)
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.reasons import Reason
from tests.support.gemm_relu_variants import TASK, render
from tests.support.placed_tiles import placed

PARAMS = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
B = 128
PARALLEL = ("parallel", "parallel", "arbitrary")
SAMPLED = 6  # the four corners of a two-axis output grid and two drawn


def _sampled(program, *inputs, seed=0):
    return run_sampled(
        jax.make_jaxpr(program)(*inputs),
        list(inputs),
        np.random.default_rng(seed),
        random_blocks=SAMPLED - 4,
        params=PARAMS,
    )


def _assert_exact(program, *inputs):
    """Accepted, and the decided elements are a full run's."""
    sampled = _sampled(program, *inputs)
    with pltpu.force_tpu_interpret_mode(PARAMS):
        full = np.asarray(jax.jit(program)(*inputs))
    decided, output = placed(sampled.decided[0])
    assert decided.any()
    np.testing.assert_array_equal(output[decided], full[decided])
    return sampled


def _gemm(kernel, scratch, semantics=PARALLEL, extra=0):
    """A (4B, 2B) @ (2B, 4B) kernel: 16 output blocks of two depth steps; `extra` inputs are
    (1, B) rows read whole by every block."""

    def program(x, w, *rows):
        return pl.pallas_call(
            kernel,
            grid=(4, 4, 2),
            in_specs=[
                pl.BlockSpec((B, B), lambda i, j, k: (i, k)),
                pl.BlockSpec((B, B), lambda i, j, k: (k, j)),
                *[pl.BlockSpec((1, B), lambda i, j, k: (0, 0)) for _ in rows],
            ],
            out_specs=pl.BlockSpec((B, B), lambda i, j, k: (i, j)),
            out_shape=jax.ShapeDtypeStruct((4 * B, 4 * B), jnp.float32),
            scratch_shapes=scratch,
            compiler_params=pltpu.CompilerParams(dimension_semantics=semantics),
        )(x, w, *rows)

    keys = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(keys[0], (4 * B, 2 * B), jnp.float32)
    w = jax.random.normal(keys[1], (2 * B, 4 * B), jnp.float32)
    rows = [jax.random.normal(keys[2], (1, B), jnp.float32) for _ in range(extra)]
    return program, (x, w, *rows)


def _dot(x_ref, w_ref):
    return jnp.dot(x_ref[...], w_ref[...], precision=jax.lax.Precision.HIGHEST)


def _accumulating(x_ref, w_ref, o_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += _dot(x_ref, w_ref)

    @pl.when(k == 1)
    def _write():
        o_ref[...] = acc_ref[...]


def _counting(x_ref, w_ref, o_ref, acc_ref, count_ref):
    """The measured attack: a counter in SMEM counts output blocks from the grid's first; from
    the 8th block on the depth steps are skipped (exact on any sample of fewer)."""
    i, j, k = pl.program_id(0), pl.program_id(1), pl.program_id(2)

    @pl.when((i == 0) & (j == 0) & (k == 0))
    def _start():
        count_ref[0] = 0

    @pl.when(k == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(count_ref[0] < 8)
    def _accumulate():
        acc_ref[...] += _dot(x_ref, w_ref)

    @pl.when(k == 1)
    def _write():
        o_ref[...] = acc_ref[...]
        count_ref[0] += 1


def _caching(x_ref, w_ref, b_ref, o_ref, acc_ref, cache_ref):
    """exp(b) computed by the grid's first block only, kept in VMEM for all the others."""
    i, j, k = pl.program_id(0), pl.program_id(1), pl.program_id(2)

    @pl.when((i == 0) & (j == 0) & (k == 0))
    def _cache():
        cache_ref[...] = jnp.exp(b_ref[...])

    _accumulating(x_ref, w_ref, o_ref, acc_ref)

    @pl.when(k == 1)
    def _bias():
        o_ref[...] += cache_ref[...]


def _nan_aware_caching(x_ref, w_ref, b_ref, o_ref, acc_ref, cache_ref):
    """The cache filled when it reads NaN (`x != x`, the first block's uninitialised memory and
    NaN poison) and trusted otherwise."""
    k = pl.program_id(2)
    unset = cache_ref[0, 0] != cache_ref[0, 0]

    @pl.when(unset & (k == 0))
    def _cache():
        cache_ref[...] = jnp.exp(b_ref[...])

    _accumulating(x_ref, w_ref, o_ref, acc_ref)

    @pl.when(k == 1)
    def _bias():
        o_ref[...] += cache_ref[...]


MARK = 12345


def _skipping_after_a_marker(x_ref, w_ref, o_ref, acc_ref, mark_ref):
    """Each block leaves a marker in SMEM; a block that finds it (it followed another block)
    skips its matmul. Poison never holds the marker: only a natural run shows the cheat."""
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(mark_ref[0] != MARK)
    def _accumulate():
        acc_ref[...] += _dot(x_ref, w_ref)

    @pl.when(k == 1)
    def _write():
        o_ref[...] = acc_ref[...]
        mark_ref[0] = MARK


def _skipping_after_a_marker_in_one_row(x_ref, w_ref, o_ref, acc_ref, mark_ref):
    """The marker cheat in the last row of blocks only (a class of its own by program ids);
    every other block computes honestly and leaves no marker."""
    i, k = pl.program_id(0), pl.program_id(2)
    last_row = i == pl.num_programs(0) - 1

    @pl.when(k == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(jnp.logical_not(last_row & (mark_ref[0] == MARK)))
    def _accumulate():
        acc_ref[...] += _dot(x_ref, w_ref)

    @pl.when(k == 1)
    def _write():
        o_ref[...] = acc_ref[...]

    @pl.when(last_row & (k == 1))
    def _mark():
        mark_ref[0] = MARK


def _zeroing_after_a_marker(x_ref, w_ref, o_ref, acc_ref, mark_ref):
    """The marker cheat without a branch on it: the result is scaled by whether the marker is
    absent (arithmetic on data, so the blocks stay one class and the natural run is short)."""
    _accumulating(x_ref, w_ref, o_ref, acc_ref)

    @pl.when(pl.program_id(2) == 1)
    def _write():
        o_ref[...] = acc_ref[...] * (mark_ref[0] != MARK).astype(jnp.float32)
        mark_ref[0] = MARK


def _zeroing_after_a_marker_in_one_row(x_ref, w_ref, o_ref, acc_ref, mark_ref):
    """The same in the last row of blocks only, a class of its own by program ids."""
    _accumulating(x_ref, w_ref, o_ref, acc_ref)
    last_row = pl.program_id(0) == pl.num_programs(0) - 1

    @pl.when(last_row & (pl.program_id(2) == 1))
    def _write():
        o_ref[...] = acc_ref[...] * (mark_ref[0] != MARK).astype(jnp.float32)
        mark_ref[0] = MARK


ACC = [pltpu.VMEM((B, B), jnp.float32)]
ATTACKS = {
    "marker scales the result": (_zeroing_after_a_marker, [*ACC, pltpu.SMEM((1,), jnp.int32)], 0),
    "marker scales one class": (
        _zeroing_after_a_marker_in_one_row,
        [*ACC, pltpu.SMEM((1,), jnp.int32)],
        0,
    ),
    "marker left for the next block": (
        _skipping_after_a_marker,
        [*ACC, pltpu.SMEM((1,), jnp.int32)],
        0,
    ),
    "marker in one class of blocks": (
        _skipping_after_a_marker_in_one_row,
        [*ACC, pltpu.SMEM((1,), jnp.int32)],
        0,
    ),
    "smem counter": (_counting, [*ACC, pltpu.SMEM((1,), jnp.int32)], 0),
    "vmem cache from block 0": (_caching, [*ACC, pltpu.VMEM((1, B), jnp.float32)], 1),
    "cache trusted unless NaN": (_nan_aware_caching, [*ACC, pltpu.VMEM((1, B), jnp.float32)], 1),
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_state_in_scratch_across_output_blocks_is_rejected(attack):
    kernel, scratch, rows = ATTACKS[attack]
    program, inputs = _gemm(kernel, scratch, extra=rows)
    with pytest.raises(KernelFault, match=r"output 0 of output block \(\d+, \d+\)") as fault:
        _sampled(program, *inputs)
    assert fault.value.reason == Reason.TILES_STATE_CARRIED


def _rows_program(kernel, semantics, scratch=()):
    """(16, 8B) in blocks of (8, B): two row blocks of eight column chunks."""

    def program(x):
        return pl.pallas_call(
            kernel,
            grid=(2, 8),
            in_specs=[pl.BlockSpec((8, B), lambda r, t: (r, t))],
            out_specs=pl.BlockSpec((8, B), lambda r, t: (r, t)),
            out_shape=jax.ShapeDtypeStruct((16, 8 * B), jnp.float32),
            scratch_shapes=list(scratch),
            compiler_params=pltpu.CompilerParams(dimension_semantics=semantics),
        )(x)

    return program, jax.random.normal(jax.random.key(1), (16, 8 * B), jnp.float32)


def _summing_into_output(x_ref, o_ref):
    """A running sum over chunks kept in the output buffer: read before it is written, relying
    on the chunk before."""

    @pl.when(pl.program_id(1) == 0)
    def _first():
        o_ref[...] = x_ref[...]

    @pl.when(pl.program_id(1) > 0)
    def _next():
        o_ref[...] = o_ref[...] + x_ref[...]


def _scanning(x_ref, o_ref, carry_ref):
    """A chunked cumulative sum along the row: each chunk's sums start from the state the chunk
    before left in scratch."""

    @pl.when(pl.program_id(1) == 0)
    def _start():
        carry_ref[...] = jnp.zeros_like(carry_ref)

    sums = jnp.cumsum(x_ref[...], axis=1) + carry_ref[...]
    o_ref[...] = sums
    carry_ref[...] = jnp.broadcast_to(sums[:, -1:], carry_ref.shape)


CARRY = [pltpu.VMEM((8, B), jnp.float32)]


def test_an_output_read_before_it_is_written_relying_on_the_block_before_is_rejected():
    program, x = _rows_program(_summing_into_output, ("parallel", "parallel"))
    with pytest.raises(KernelFault) as fault:
        _sampled(program, x)
    assert fault.value.reason == Reason.TILES_STATE_CARRIED


def test_a_scan_along_a_parallel_axis_is_rejected():
    program, x = _rows_program(_scanning, ("parallel", "parallel"), CARRY)
    with pytest.raises(KernelFault, match="differs when it started from"):
        _sampled(program, x)


def test_a_scan_along_an_arbitrary_axis_is_checked_through_the_prefixes_of_its_blocks():
    program, x = _rows_program(_scanning, ("parallel", "arbitrary"), CARRY)
    sampled = _assert_exact(program, x)
    (kernel,) = sampled.kernels
    assert SAMPLED < kernel.blocks <= kernel.of_blocks == 16
    # the same scan, its state from an output block into the next, but in an output ref:
    # rejected only where the axis may be split across cores
    program, x = _rows_program(_summing_into_output, ("parallel", "arbitrary"))
    _assert_exact(program, x)


def test_a_prefix_over_the_budget_is_checked_at_small_shapes_only(monkeypatch):
    monkeypatch.setattr(poison, "PREFIX_STEPS", 16)
    program, x = _rows_program(_scanning, ("parallel", "arbitrary"), CARRY)
    with pytest.raises(NotSampleable, match=r"arbitrary grid axes 1: .* \(budget 16\)"):
        _sampled(program, x)


@pytest.mark.parametrize("semantics", [PARALLEL, ("arbitrary",) * 3])
def test_an_accumulator_zeroed_at_the_first_depth_step_is_accepted(semantics):
    program, inputs = _gemm(_accumulating, ACC, semantics)
    sampled = _assert_exact(program, *inputs)
    # no state across output blocks, whatever the axes are declared: the sample alone
    assert sampled.kernels[0].blocks == SAMPLED


def _attention(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref):
    """Online softmax over key blocks: running max, sum and accumulator in scratch, reset at
    the first key block, written at the last."""
    kv = pl.program_id(1)

    @pl.when(kv == 0)
    def _reset():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    s = jnp.dot(q_ref[...], k_ref[...].T, precision=jax.lax.Precision.HIGHEST)
    m_new = jnp.maximum(m_ref[...], s.max(axis=1, keepdims=True))
    p = jnp.exp(s - m_new)
    scale = jnp.exp(m_ref[...] - m_new)
    l_ref[...] = l_ref[...] * scale + p.sum(axis=1, keepdims=True)
    acc_ref[...] = acc_ref[...] * scale + jnp.dot(
        p, v_ref[...], precision=jax.lax.Precision.HIGHEST
    )
    m_ref[...] = m_new

    @pl.when(kv == pl.num_programs(1) - 1)
    def _write():
        o_ref[...] = acc_ref[...] / l_ref[...]


def test_flash_attention_statistics_in_scratch_are_accepted():
    q, k, v = (jax.random.normal(key, (8 * B, B)) for key in jax.random.split(jax.random.key(2), 3))

    def program(q, k, v):
        return pl.pallas_call(
            _attention,
            grid=(8, 2),
            in_specs=[
                pl.BlockSpec((B, B), lambda i, kv: (i, 0)),
                pl.BlockSpec((4 * B, B), lambda i, kv: (kv, 0)),
                pl.BlockSpec((4 * B, B), lambda i, kv: (kv, 0)),
            ],
            out_specs=pl.BlockSpec((B, B), lambda i, kv: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((8 * B, B), jnp.float32),
            scratch_shapes=[pltpu.VMEM((B, 1), jnp.float32)] * 2 + [ACC[0]],
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        )(q, k, v)

    sampled = _assert_exact(program, q, k, v)
    assert sampled.kernels[0].blocks == 4  # two corners of one output axis and two drawn


def _gathering(index_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + index_ref[pl.program_id(0)].astype(jnp.float32)


def test_a_kernel_with_scalar_prefetch_is_accepted():
    """The prefetched scalars (SMEM, read by the index maps) are the kernel's inputs: never
    poisoned."""
    index = jnp.array([3, 0, 7, 7, 1, 5, 2, 6], jnp.int32)
    x = jax.random.normal(jax.random.key(3), (64, B), jnp.float32)

    def program(index, x):
        return pl.pallas_call(
            _gathering,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1,
                grid=(8,),
                in_specs=[pl.BlockSpec((8, B), lambda i, index: (index[i], 0))],
                out_specs=pl.BlockSpec((8, B), lambda i, index: (i, 0)),
            ),
            out_shape=jax.ShapeDtypeStruct((64, B), jnp.float32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        )(index, x)

    _assert_exact(program, index, x)


@pytest.mark.parametrize(
    ("classes", "rows"),
    [
        ([0, 0, 0, 0, 0, 0, 0, 0], [0, 1]),  # one class: two blocks, one following the other
        ([0, 0, 1, 0, 2, 1], [0, 1, 2, 5, 4]),
        ([3, 0, 0], [0, 1, 2]),
        ([5], [0]),
    ],
)
def test_the_natural_run_holds_two_blocks_of_every_class_one_after_the_other(classes, rows):
    assert poison.natural_rows(np.array(classes)).tolist() == rows


def test_the_natural_run_of_a_one_class_kernel_runs_two_blocks(monkeypatch):
    """The cost follows the classes: the poisoned run holds the sample, the natural one the
    first block and a follower (the gemm has one class)."""
    ran = []
    real = poison.stateless_run

    def counting(kernel, run, sample, seed, classes, visits=None):
        def recorded(blocks, plan):
            ran.append((plan is not None, len(blocks)))
            return run(blocks, plan)

        return real(kernel, recorded, sample, seed, classes, visits)

    monkeypatch.setattr(poison, "stateless_run", counting)
    program, inputs = _gemm(_accumulating, ACC)
    sampled = _assert_exact(program, *inputs)
    assert sampled.kernels[0].blocks == SAMPLED
    assert ran == [(True, SAMPLED), (False, 2)]


def test_each_pattern_poisons_some_block_and_the_same_seed_the_same_ones():
    blocks = np.array([[0, 0], [0, 7], [1, 3], [3, 0], [3, 7]])
    plan = poison.Plan.of(blocks, 11)
    assert set(plan.patterns) == set(poison.Poison)
    again = poison.Plan.of(blocks, 11)
    assert (again.patterns, again.salts) == (plan.patterns, plan.salts)


@pytest.mark.slow
def test_the_smem_counter_attack_is_rejected_through_the_harness(tmp_path, monkeypatch):
    """The measured attack at gemm_relu's production shapes (sixteen output blocks), with a
    held-out shape of one block like check's: exact there (interpret mode runs parallel blocks
    in a random order, so several blocks would show the counter) and in the sample's eight
    production blocks on the base commit; rejected for the state it carries."""
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(tmp_path / "cache"))
    task = shutil.copytree(TASK, tmp_path / "gemm_relu")
    reference = task / "reference.py"
    heldout = '"heldout": {"batch": 200, "in_features": 384, "out_features": 640}'
    assert heldout in reference.read_text()
    reference.write_text(reference.read_text().replace(heldout, heldout.replace("640", "384")))
    with Harness() as harness:
        report = harness.evaluate(
            KernelSource.read(render("smem_counter", tmp_path)),
            load_task(task),
            EvalOptions(seeds=1, tile_blocks=4),
        )
    assert report.verdict == "rejected"
    assert (report.failure.name, report.failure.reason) == ("tiles", Reason.TILES_STATE_CARRIED)
    passed = {c.name for c in report.checks if c.status == "pass"}
    assert {"numerics", "heldout", "production"} <= passed
