"""Pipelines of several pallas_calls at production tiles (evaluation/tiles/pullback.py): the
kernels that make the final outputs are sampled, each earlier kernel runs the blocks the later
samples read (pulled back through the index maps and the XLA between), and the final elements
those decide are compared. In-process jax, small shapes (seconds)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels.evaluation.tiles import pullback
from maxkernel_tui.kernels.evaluation.tiles.sampled_run import NotSampleable, run_sampled
from tests.support.mxu import mxu_exact
from tests.support.placed_tiles import placed

PARAMS = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
B = 128
M, K, N = 512, 256, 512  # a 4x4 grid of output blocks, two depth steps


def _matmul_kernel(x_ref, w_ref, o_ref, acc_ref, *, cheat):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _write():
        # the cheat: one interior block, chosen by program ids that exist only at production
        wrong = cheat & (pl.program_id(0) == 2) & (pl.program_id(1) == 1)
        wrong &= pl.num_programs(0) > 3
        o_ref[...] = acc_ref[...] + jnp.where(wrong, 1.0, 0.0)


def _matmul(x, w, cheat=False):
    m, depth = x.shape
    n = w.shape[1]
    return pl.pallas_call(
        functools.partial(_matmul_kernel, cheat=cheat),
        grid=(m // B, n // B, depth // B),
        in_specs=[
            pl.BlockSpec((B, B), lambda i, j, k: (i, k)),
            pl.BlockSpec((B, B), lambda i, j, k: (k, j)),
        ],
        out_specs=pl.BlockSpec((B, B), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        scratch_shapes=[pltpu.VMEM((B, B), jnp.float32)],
    )(x, w)


def _softmax_kernel(y_ref, o_ref):
    y = y_ref[...]
    e = jnp.exp(y - y.max(axis=1, keepdims=True))
    o_ref[...] = e / e.sum(axis=1, keepdims=True)


def _softmax_rows(y):
    rows, cols = y.shape
    return pl.pallas_call(
        _softmax_kernel,
        grid=(rows // B,),
        in_specs=[pl.BlockSpec((B, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((B, cols), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype),
    )(y)


def _column_sum_kernel(y_ref, o_ref):
    o_ref[...] = y_ref[...].sum(axis=0, keepdims=True)


def _column_sums(y):
    rows, cols = y.shape
    return pl.pallas_call(
        _column_sum_kernel,
        grid=(cols // B,),
        in_specs=[pl.BlockSpec((rows, B), lambda j: (0, j))],
        out_specs=pl.BlockSpec((1, B), lambda j: (0, j)),
        out_shape=jax.ShapeDtypeStruct((1, cols), y.dtype),
    )(y)


def _inputs():
    x = mxu_exact(jax.random.normal(jax.random.key(0), (M, K), jnp.float32))
    w = mxu_exact(jax.random.normal(jax.random.key(1), (K, N), jnp.float32) * 0.1)
    return x, w


def _sampled(program, x, w, seed=0, random_blocks=1):
    return run_sampled(
        jax.make_jaxpr(program)(x, w),
        [x, w],
        np.random.default_rng(seed),
        random_blocks=random_blocks,
        params=PARAMS,
    )


def _reference(program, x, w):
    with jax.default_matmul_precision("highest"):
        return np.asarray(program(x, w, honest=True))


def _softmax_after_matmul(x, w, honest=False):
    y = x @ w if honest else _matmul(x, w, cheat=True)
    return _softmax(y, honest)


def _softmax(y, honest):
    if honest:
        return jax.nn.softmax(y, axis=1)
    return _softmax_rows(y)


def test_a_first_stage_wrong_only_in_a_block_the_second_stage_reads_is_found():
    """The matmul is wrong in block (2, 1) only, at production; the softmax's sampled rows (all
    four) read it, so that block runs and the final rows it feeds are decided and wrong. Before
    the pullback, the matmul was sampled alone and no final element was decided."""
    x, w = _inputs()
    sampled = _sampled(_softmax_after_matmul, x, w, random_blocks=2)
    first, second = sampled.kernels
    assert second.blocks == second.of_blocks == 4
    assert first.blocks == first.of_blocks == 16  # every block is read by some sampled row
    decided, output = placed(sampled.decided[0])
    assert decided.all()
    reference = _reference(_softmax_after_matmul, x, w)
    wrong = ~np.isclose(output, reference, rtol=1e-4, atol=1e-6)
    assert wrong[2 * B : 3 * B].any() and not wrong[: 2 * B].any() and not wrong[3 * B :].any()


@pytest.mark.parametrize("between", ["reshape", "transpose"])
def test_an_honest_matmul_then_row_softmax_is_decided_through_the_xla_between(between):
    """Only the matmul blocks the sampled rows read run (a reshape splits each row in two, a
    transpose makes rows of columns); the decided elements are exactly the sampled rows."""
    x, w = _inputs()

    def program(x, w, honest=False):
        y = x @ w if honest else _matmul(x, w)
        if between == "reshape":
            return _softmax(y.reshape(2 * M, N // 2), honest)
        return _softmax(y.T, honest)

    sampled = _sampled(program, x, w)
    first, second = sampled.kernels
    assert second.of_blocks == 8 if between == "reshape" else 4
    assert second.blocks == 3  # the first and last rows and one drawn
    decided, output = placed(sampled.decided[0])
    # whole rows, three blocks of them
    assert (
        decided.all(axis=1) == decided.any(axis=1)
    ).all() and decided.sum() == 3 * B * decided.shape[1]
    assert first.blocks < first.of_blocks  # the matmul ran the blocks the sample reads
    np.testing.assert_allclose(
        output[decided], _reference(program, x, w)[decided], rtol=1e-4, atol=1e-6
    )


def test_an_honest_matmul_then_column_sums_is_decided():
    x, w = _inputs()

    def program(x, w, honest=False):
        y = x @ w if honest else _matmul(x, w)
        return y.sum(axis=0, keepdims=True) if honest else _column_sums(y)

    sampled = _sampled(program, x, w, random_blocks=0)
    first, second = sampled.kernels
    # the first and last columns, every row (and a block of each class of the matmul's)
    assert second.blocks == 2 and 8 <= first.blocks < first.of_blocks
    decided, output = placed(sampled.decided[0])
    assert decided.sum() == 2 * B
    reference = _reference(program, x, w)
    np.testing.assert_allclose(output[decided], reference[decided], rtol=1e-4, atol=1e-4)


def test_an_earlier_kernel_whose_read_blocks_are_too_many_is_not_sampled(monkeypatch):
    x, w = _inputs()

    def program(x, w):
        return _column_sums(_matmul(x, w))

    monkeypatch.setattr(pullback, "MAX_PULLED_BLOCKS", 6)
    monkeypatch.setattr(pullback, "MAX_PULLED_STEPS", 6 * 2)  # the matmul's blocks: 2 steps
    with pytest.raises(NotSampleable, match=r"_matmul_kernel's output blocks .* \d+ of 16, more"):
        _sampled(program, x, w, random_blocks=0)


def test_an_earlier_kernel_over_the_block_cap_in_few_grid_steps_runs_them(monkeypatch):
    """3p: the output projection's edges read 260 of the attention's 1024 blocks, 2 steps each;
    over the block cap, within the step budget: run, without the final kernel's random draw."""
    x, w = _inputs()

    def program(x, w, honest=False):
        y = x @ w if honest else _matmul(x, w)
        return y.sum(axis=0, keepdims=True) if honest else _column_sums(y)

    monkeypatch.setattr(pullback, "MAX_PULLED_BLOCKS", 6)
    monkeypatch.setattr(pullback, "MAX_PULLED_STEPS", 16 * 2)
    sampled = _sampled(program, x, w, random_blocks=2)
    first, second = sampled.kernels
    assert first.blocks > 6 and second.blocks == 2  # the column sums' edges, no draw
    decided, output = placed(sampled.decided[0])
    assert decided.sum() == 2 * B
    np.testing.assert_allclose(
        output[decided], _reference(program, x, w)[decided], rtol=1e-4, atol=1e-4
    )


def test_final_samples_too_spread_for_the_earlier_kernel_keep_their_edges_and_classes(monkeypatch):
    """9p: the down projection's random draw spread over rows reads more gate/up blocks than
    can be run; the final kernel keeps its edges and classes (no random draw) and the
    pipeline is decided there, where it used to be refused whole."""
    x, w = _inputs()

    def program(x, w, honest=False):
        y = x @ w if honest else _matmul(x, w)
        return y.sum(axis=0, keepdims=True) if honest else _column_sums(y)

    # the drawn columns would need all 16 matmul blocks; the edges need 8 and the classes' own
    monkeypatch.setattr(pullback, "MAX_PULLED_BLOCKS", 10)
    sampled = _sampled(program, x, w, random_blocks=2)
    first, second = sampled.kernels
    assert second.blocks == 2 and 8 <= first.blocks <= 10
    decided, output = placed(sampled.decided[0])
    assert decided.sum() == 2 * B
    np.testing.assert_allclose(
        output[decided],
        _reference(program, x, w)[decided],
        rtol=1e-4,
        atol=1e-4,
    )


def test_the_values_alive_at_each_kernel_are_those_used_after_it():
    """The memory check (tiles/memory.py) counts, at each kernel, the production values computed
    before it and read at or after it, not every earlier kernel's outputs."""
    x, w = _inputs()

    def program(x, w):
        y = _matmul(x, w)
        z = _softmax_rows(y.reshape(2 * M, N // 2))
        return _column_sums(z)

    alive = [live for _, live in pullback.kernels_alive(jax.make_jaxpr(program)(x, w))]
    # softmax: the reshaped matmul output (the matmul's own is last read by the reshape);
    # column sums: the softmax's output
    assert alive == [0, M * N * 4, M * N * 4]


def _total_kernel(y_ref, o_ref):
    o_ref[...] = y_ref[...].sum(keepdims=True)


def test_a_final_output_that_reads_every_earlier_block_says_so(monkeypatch):
    """13p: the mean loss is one element that depends on every logit."""
    x, w = _inputs()

    def program(x, w):
        y = _matmul(x, w)
        return pl.pallas_call(
            _total_kernel,
            grid=(1,),
            in_specs=[pl.BlockSpec(y.shape, lambda i: (0, 0))],
            out_specs=pl.BlockSpec((1, 1), lambda i: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((1, 1), y.dtype),
        )(y)

    monkeypatch.setattr(pullback, "MAX_PULLED_BLOCKS", 6)
    monkeypatch.setattr(pullback, "MAX_PULLED_STEPS", 6 * 2)
    with pytest.raises(NotSampleable, match=r"every one of _matmul_kernel's 16 output blocks"):
        _sampled(program, x, w)


def _statistics_kernel(y_ref, o_ref):
    """Column means over row blocks: one output block, every grid step a reduction step."""

    @pl.when(pl.program_id(0) == 0)
    def _zero():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += y_ref[...].sum(axis=0, keepdims=True) / M


def _centering_kernel(y_ref, mean_ref, o_ref):
    o_ref[...] = y_ref[...] - mean_ref[...]


def _centered(x, w, honest=False):
    """34k's shape of pipeline: batch statistics in one output block, then a kernel that reads
    them for every block of rows."""
    y = x @ w if honest else _matmul(x, w)
    if honest:
        return y - y.mean(axis=0, keepdims=True)
    mean = pl.pallas_call(
        _statistics_kernel,
        grid=(M // B,),
        in_specs=[pl.BlockSpec((B, N), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((1, N), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((1, N), jnp.float32),
    )(y)
    return pl.pallas_call(
        _centering_kernel,
        grid=(M // B,),
        in_specs=[pl.BlockSpec((B, N), lambda i: (i, 0)), pl.BlockSpec((1, N), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((B, N), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32),
    )(y, mean)


def test_an_earlier_kernel_with_a_single_output_block_is_run_whole_and_decides():
    """Its one block has no output-axis ids: the blocks the later sample needs are that block
    (the sampled run had stopped planning it: reshape(-1, 0) of one row of no ids)."""
    x, w = _inputs()
    sampled = _sampled(_centered, x, w)
    matmul, statistics, centering = sampled.kernels
    assert centering.of_blocks == M // B
    assert statistics.of_blocks == 1 and statistics.blocks == 1
    assert matmul.blocks == matmul.of_blocks  # the statistics read every row of y
    decided, output = placed(sampled.decided[0])
    assert decided.any()
    np.testing.assert_allclose(
        output[decided], _reference(_centered, x, w)[decided], rtol=1e-4, atol=1e-4
    )
