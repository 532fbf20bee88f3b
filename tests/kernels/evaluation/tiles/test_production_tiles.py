"""Sampled production tiles (evaluation/tiles/sampled_run.py) run exactly the body a full run
runs: the real program ids and grid sizes, every reduction step of each sampled block, blocks
never sampled left undecided. In-process jax, small shapes (seconds)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels.evaluation.tiles import sampled_run
from maxkernel_tui.kernels.evaluation.tiles.blocks import sample_blocks
from maxkernel_tui.kernels.evaluation.tiles.sampled_run import NotSampleable, run_sampled
from tests.support.mxu import mxu_exact
from tests.support.placed_tiles import placed

PARAMS = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
B = 128


def _telling_kernel(x_ref, w_ref, o_ref, acc_ref):
    """Accumulates over depth and writes what it was told: its program ids and grid sizes; on a
    large grid it takes another branch (as a cheat would)."""
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _write():
        told = (
            pl.program_id(0) * 1000.0
            + pl.program_id(1) * 10.0
            + pl.num_programs(0) * 1e5
            + pl.num_programs(1) * 1e6
        )
        big = jnp.where(pl.num_programs(0) > 3, 1e7, 0.0)
        o_ref[...] = acc_ref[...] + told + big


def _program(x, w):
    m, depth = x.shape
    n = w.shape[1]
    out = pl.pallas_call(
        _telling_kernel,
        grid=(m // B, n // B, depth // B),
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
    return out[:, : n - 64] * 2.0  # XLA after the kernel: a slice and a scale


def _inputs():
    x = mxu_exact(jax.random.normal(jax.random.key(0), (512, 384), jnp.float32))
    w = mxu_exact(jax.random.normal(jax.random.key(1), (384, 640), jnp.float32))
    return x, w


def test_sampled_blocks_equal_a_full_run_with_real_program_ids_and_grid_sizes():
    x, w = _inputs()
    with pltpu.force_tpu_interpret_mode(PARAMS):
        full = np.asarray(jax.jit(_program)(x, w))
    sampled = run_sampled(
        jax.make_jaxpr(_program)(x, w),
        [x, w],
        np.random.default_rng(3),
        random_blocks=3,
        params=PARAMS,
    )
    (kernel,) = sampled.kernels
    assert kernel.grid == (4, 5, 3) and kernel.output_axes == (0, 1)
    assert kernel.of_blocks == 20 and kernel.blocks == 7  # four corners and three drawn
    assert kernel.steps == 7 * 3  # every depth step of each sampled block
    decided, output = placed(sampled.decided[0])
    assert decided.shape == full.shape and 0 < decided.sum() < decided.size
    # the body saw the production program ids and grid sizes (4 row blocks: the large branch)
    np.testing.assert_array_equal(output[decided], full[decided])
    assert (full[decided] > 1e7).all()
    rows, cols = np.nonzero(decided)
    blocks = {(int(r) // B, int(c) // B) for r, c in zip(rows, cols, strict=True)}
    assert {(0, 0), (3, 0), (0, 4), (3, 4)} <= blocks and len(blocks) == 7


def test_a_fresh_sample_each_time_always_holds_the_first_and_last_block_of_each_axis():
    samples = [sample_blocks((8, 16), np.random.default_rng(seed), 4) for seed in range(6)]
    for sample in samples:
        rows = {tuple(r) for r in sample}
        assert {(0, 0), (0, 15), (7, 0), (7, 15)} <= rows and len(rows) == 8
    assert len({s.tobytes() for s in samples}) > 1
    # more than eight corners: the all-first and all-last blocks stand for them
    four_axes = {tuple(r) for r in sample_blocks((3, 3, 3, 3), np.random.default_rng(0), 2)}
    assert {(0, 0, 0, 0), (2, 2, 2, 2)} <= four_axes and len(four_axes) == 4
    assert sample_blocks((2,), np.random.default_rng(0), 5).tolist() == [[0], [1]]


def test_elements_mixed_from_every_block_are_not_decided_by_a_sample():
    """A sum over all rows after the kernel depends on blocks never run: nothing is decided,
    so nothing unsampled can pass for verified."""
    x, w = _inputs()

    def summed(x, w):
        return _program(x, w).sum(axis=0)

    sampled = run_sampled(
        jax.make_jaxpr(summed)(x, w),
        [x, w],
        np.random.default_rng(0),
        random_blocks=1,
        params=PARAMS,
    )
    assert sampled.decided_elements == 0


def test_a_program_without_a_sampleable_kernel_says_why():
    x, w = _inputs()
    with pytest.raises(NotSampleable, match="no pallas_call"):
        run_sampled(
            jax.make_jaxpr(jnp.matmul)(x, w),
            [x, w],
            np.random.default_rng(0),
            random_blocks=1,
            params=PARAMS,
        )


def _direct(x, w):
    """The kernel's output as the program's, reshaped and converted: positions kept."""
    m, depth = x.shape
    n = w.shape[1]
    out = pl.pallas_call(
        _telling_kernel,
        grid=(m // B, n // B, depth // B),
        in_specs=[
            pl.BlockSpec((B, B), lambda i, j, k: (i, k)),
            pl.BlockSpec((B, B), lambda i, j, k: (k, j)),
        ],
        out_specs=pl.BlockSpec((B, B), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        scratch_shapes=[pltpu.VMEM((B, B), jnp.float32)],
    )(x, w)
    return out.reshape(2, m // 2, n).astype(jnp.bfloat16)


@pytest.mark.parametrize("nan_in_input", [False, True])
def test_outputs_straight_from_the_kernel_are_decided_as_the_provenance_pass_decides(
    monkeypatch, nan_in_input
):
    """Without the provenance pass (the outputs are the kernel's, reshaped and converted) the
    decided elements are those it would find: the sampled blocks, less any that read NaN."""
    x, w = _inputs()
    if nan_in_input:
        x = x.at[B + 3, 5].set(jnp.nan)  # row block 1 reads it: undecided there
    program = jax.make_jaxpr(_direct)(x, w)

    def sampled(rng):
        return run_sampled(program, [x, w], rng, random_blocks=6, params=PARAMS)

    direct = sampled(np.random.default_rng(5))
    assert sampled_run._direct_outputs(program.jaxpr) == [0]
    monkeypatch.setattr(sampled_run, "_direct_outputs", lambda _jaxpr: None)
    followed = sampled(np.random.default_rng(5))
    np.testing.assert_array_equal(direct.decided[0].indices, followed.decided[0].indices)
    assert 0 < direct.decided_elements < 512 * 640
    rows = np.nonzero(direct.decided[0].mask().reshape(512, 640))[0] // B
    assert (1 not in set(rows.tolist())) == nan_in_input
    np.testing.assert_array_equal(
        direct.decided[0].values.astype(np.float32),
        followed.decided[0].values.astype(np.float32),
    )


def test_an_output_that_moves_elements_is_followed_by_the_provenance_pass():
    x, w = _inputs()
    for moved in (lambda x, w: _direct(x, w).T, lambda x, w: _program(x, w)):
        assert sampled_run._direct_outputs(jax.make_jaxpr(moved)(x, w).jaxpr) is None
