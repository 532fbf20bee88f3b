"""Classes of output blocks (evaluation/tiles/classes.py): a kernel's scalar control evaluated at
every production grid point, and a sample that covers every class. A cheat in one interior block
chosen by program ids, by a scalar-prefetch value or by an index map is sampled (a random draw
misses it), an output block left and visited again is a fault, and honest kernels whose bodies
differ by block (causal diagonals, ragged lengths, fast paths on data, padded tiles) are still
verified with few classes. In-process jax, small shapes (seconds)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.evaluation.tiles import classes
from maxkernel_tui.kernels.evaluation.tiles.blocks import sample_blocks
from maxkernel_tui.kernels.evaluation.tiles.faults import KernelFault, NotSampleable
from maxkernel_tui.kernels.evaluation.tiles.sampled_run import run_sampled
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.checks import PASS, Check, EvalReport
from maxkernel_tui.kernels.report.reasons import Reason, TilesFigures
from maxkernel_tui.kernels.report.words import check_words
from tests.support.gemm_relu_variants import TASK, render
from tests.support.mxu import mxu_exact
from tests.support.placed_tiles import placed

PARAMS = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
B = 128
SEEDS = (0, 1, 2)
ARBITRARY = pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"))


def _sampled(program, *inputs, seed=0):
    return run_sampled(
        jax.make_jaxpr(program)(*inputs),
        list(inputs),
        np.random.default_rng(seed),
        random_blocks=4,
        params=PARAMS,
    )


def _wrong(sampled, expected) -> int:
    """Decided elements that differ from the expected output (a skipped block's zeros are right
    where the product is near zero)."""
    decided, output = placed(sampled.decided[0])
    assert decided.any()
    return int((~np.isclose(output[decided], np.asarray(expected)[decided], atol=1e-3)).sum())


def _matmul(x, w, body, x_map=lambda i, j, k: (i, k)):
    return pl.pallas_call(
        body,
        grid=(x.shape[0] // B, w.shape[1] // B, x.shape[1] // B),
        in_specs=[pl.BlockSpec((B, B), x_map), pl.BlockSpec((B, B), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((B, B), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), jnp.float32),
        scratch_shapes=[pltpu.VMEM((B, B), jnp.float32)],
        compiler_params=ARBITRARY,
    )(x, w)


def _accumulating(skip=lambda: False):
    def body(x_ref, w_ref, o_ref, acc_ref):
        k = pl.program_id(2)

        @pl.when(k == 0)
        def _zero():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        @pl.when(jnp.logical_not(skip()))
        def _accumulate():
            acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

        @pl.when(k == pl.num_programs(2) - 1)
        def _write():
            o_ref[...] = acc_ref[...]

    return body


def _operands(rows=8 * B, depth=2 * B, cols=8 * B):
    x = mxu_exact(jax.random.normal(jax.random.key(0), (rows, depth), jnp.float32))
    w = mxu_exact(jax.random.normal(jax.random.key(1), (depth, cols), jnp.float32))
    return x, w


def test_a_random_draw_and_the_corners_miss_one_interior_block_of_an_8_by_8_grid():
    """What today's sample held for the seeds these tests use: block (5, 3) never."""
    for seed in SEEDS:
        assert (5, 3) not in {
            tuple(r) for r in sample_blocks((8, 8), np.random.default_rng(seed), 4)
        }


@pytest.mark.parametrize("seed", SEEDS)
def test_a_reduction_skipped_in_one_interior_block_by_program_ids_is_sampled(seed):
    x, w = _operands()
    cheat = _accumulating(lambda: (pl.program_id(0) == 5) & (pl.program_id(1) == 3))
    sampled = _sampled(lambda x, w: _matmul(x, w, cheat), x, w, seed=seed)
    (kernel,) = sampled.kernels
    # row 5, column 3, both, neither: each comparison is a decision
    assert kernel.classes == 4 and kernel.blocks <= 11
    assert B * B - 8 < _wrong(sampled, x @ w) <= B * B  # the skipped block, nothing else


def test_a_reduction_skipped_where_a_scalar_prefetch_value_says_is_sampled():
    x, w = _operands()
    flags = jnp.zeros((8, 8), jnp.int32).at[5, 3].set(7)

    def body(flags_ref, x_ref, w_ref, o_ref, acc_ref):
        skip = lambda: flags_ref[pl.program_id(0), pl.program_id(1)] == 7  # noqa: E731
        _accumulating(skip)(x_ref, w_ref, o_ref, acc_ref)

    def program(flags, x, w):
        return pl.pallas_call(
            body,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1,
                grid=(8, 8, 2),
                in_specs=[
                    pl.BlockSpec((B, B), lambda i, j, k, f: (i, k)),
                    pl.BlockSpec((B, B), lambda i, j, k, f: (k, j)),
                ],
                out_specs=pl.BlockSpec((B, B), lambda i, j, k, f: (i, j)),
                scratch_shapes=[pltpu.VMEM((B, B), jnp.float32)],
            ),
            out_shape=jax.ShapeDtypeStruct((8 * B, 8 * B), jnp.float32),
            compiler_params=ARBITRARY,
        )(flags, x, w)

    sampled = _sampled(program, flags, x, w)
    assert sampled.kernels[0].classes == 2
    assert B * B - 8 < _wrong(sampled, x @ w) <= B * B


def test_an_index_map_that_reads_another_block_for_one_interior_block_is_sampled():
    x, w = _operands()

    def x_map(i, j, k):
        return jnp.where((i == 5) & (j == 3), 0, i), k

    sampled = _sampled(lambda x, w: _matmul(x, w, _accumulating(), x_map), x, w)
    assert sampled.kernels[0].classes == 4
    assert B * B - 8 < _wrong(sampled, x @ w) <= B * B


@pytest.mark.parametrize(
    ("steps", "out_blocks", "out_map", "where"),
    [
        # today the interpreter stops on it, and the stop reads `checked at small shapes only`
        (
            4,
            2,
            lambda i: (i % 2, 0),
            r"block \(0, 0\) is visited at grid step \(0,\), left, and "
            r"visited again at \(2,\)",
        ),
        # blocks 4 and 9 never both in today's sample (seeds 0 to 2)
        (16, 16, lambda i: (jnp.where(i == 9, 4, i), 0), r"block \(4, 0\) .* again at \(9,\)"),
    ],
)
def test_an_output_block_left_and_visited_again_is_a_fault(steps, out_blocks, out_map, where):
    x = mxu_exact(jax.random.normal(jax.random.key(0), (steps * B, B), jnp.float32))

    def program(x):
        return pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2.0),
            grid=(steps,),
            in_specs=[pl.BlockSpec((B, B), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((B, B), out_map),
            out_shape=jax.ShapeDtypeStruct((out_blocks * B, B), jnp.float32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        )(x)

    with pytest.raises(KernelFault, match=where) as got:
        _sampled(program, x)
    assert got.value.reason == Reason.TILES_OUTPUT_REVISITED


def test_an_accumulator_over_an_arbitrary_axis_is_one_class_and_verified():
    x, w = _operands(rows=4 * B, depth=3 * B, cols=4 * B)
    sampled = _sampled(lambda x, w: _matmul(x, w, _accumulating()), x, w)
    assert (sampled.kernels[0].classes, sampled.kernels[0].on_data) == (1, 0)
    assert _wrong(sampled, x @ w) == 0


def test_causal_diagonal_blocks_are_a_class_per_query_row_and_verified():
    """Blocks below the diagonal accumulate whole, the diagonal masked, above skipped (and not
    fetched: the index map clamps to the diagonal): one class per query row of blocks."""
    x, w = _operands(rows=4 * B, depth=4 * B, cols=2 * B)

    def body(x_ref, w_ref, o_ref, acc_ref):
        q, kv = pl.program_id(0), pl.program_id(2)

        @pl.when(kv == 0)
        def _zero():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        @pl.when(kv < q)
        def _below():
            acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

        @pl.when(kv == q)
        def _diagonal():
            rows = jax.lax.broadcasted_iota(jnp.int32, (B, B), 0)
            cols = jax.lax.broadcasted_iota(jnp.int32, (B, B), 1)
            masked = jnp.where(cols <= rows, x_ref[...], 0.0)
            acc_ref[...] += jnp.dot(masked, w_ref[...], preferred_element_type=jnp.float32)

        @pl.when(kv == pl.num_programs(2) - 1)
        def _write():
            o_ref[...] = acc_ref[...]

    def program(x, w):
        return _matmul(x, w, body, lambda q, j, kv: (q, jnp.minimum(kv, q)))

    sampled = _sampled(program, x, w)
    assert sampled.kernels[0].classes == 4
    assert _wrong(sampled, jnp.tril(x) @ w) == 0


def test_ragged_lengths_by_scalar_prefetch_are_a_class_per_length_and_verified():
    """Row sums of each batch row's first `lengths[b]` columns: steps past the length skipped
    and not fetched, the last one masked."""
    lengths = jnp.array([128, 300, 512, 40, 300, 512, 512, 1], jnp.int32)
    x = mxu_exact(jax.random.normal(jax.random.key(2), (8, 8, 4 * B), jnp.float32))

    def body(lengths_ref, x_ref, o_ref):
        b, t = pl.program_id(0), pl.program_id(1)

        @pl.when(t == 0)
        def _zero():
            o_ref[...] = jnp.zeros_like(o_ref)

        @pl.when(t * B < lengths_ref[b])
        def _add():
            cols = t * B + jax.lax.broadcasted_iota(jnp.int32, (1, 8, B), 2)
            o_ref[...] += jnp.where(cols < lengths_ref[b], x_ref[...], 0.0)

    def program(lengths, x):
        last = lambda b, t, lengths: (lengths[b] - 1) // B  # noqa: E731
        return pl.pallas_call(
            body,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1,
                grid=(8, 4),
                in_specs=[
                    pl.BlockSpec(
                        (1, 8, B), lambda b, t, lengths: (b, 0, jnp.minimum(t, last(b, t, lengths)))
                    )
                ],
                out_specs=pl.BlockSpec((1, 8, B), lambda b, t, lengths: (b, 0, 0)),
            ),
            out_shape=jax.ShapeDtypeStruct((8, 8, B), jnp.float32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        )(lengths, x)

    sampled = _sampled(program, lengths, x)
    # one block (lengths 1, 40, 128), three blocks (300), four (512)
    assert sampled.kernels[0].classes == 3
    mask = np.arange(4 * B)[None, None, :] < np.asarray(lengths)[:, None, None]
    masked = np.where(mask, np.asarray(x), 0.0).reshape(8, 8, 4, B).sum(axis=2)
    assert _wrong(sampled, masked) == 0


def test_a_zero_block_fast_path_is_control_on_data_said_and_verified():
    x, w = _operands(rows=4 * B, depth=2 * B, cols=4 * B)
    x = x.at[:B].set(0.0)

    def body(x_ref, w_ref, o_ref, acc_ref):
        skip = lambda: jnp.logical_not(jnp.any(x_ref[...] != 0))  # noqa: E731
        _accumulating(skip)(x_ref, w_ref, o_ref, acc_ref)

    sampled = _sampled(lambda x, w: _matmul(x, w, body), x, w)
    (kernel,) = sampled.kernels
    assert (kernel.classes, kernel.on_data) == (1, 1)
    assert "1 branch on data (or not followed) not classed" in kernel.describe()
    assert _wrong(sampled, x @ w) == 0


def test_padded_tiles_with_a_partial_last_block_are_one_class_and_verified():
    x = mxu_exact(jax.random.normal(jax.random.key(3), (200, 300), jnp.float32))

    def program(x):
        return pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2.0),
            grid=(2, 3),
            in_specs=[pl.BlockSpec((B, B), lambda i, j: (i, j))],
            out_specs=pl.BlockSpec((B, B), lambda i, j: (i, j)),
            out_shape=jax.ShapeDtypeStruct((200, 300), jnp.float32),
        )(x)

    sampled = _sampled(program, x)
    assert sampled.kernels[0].classes == 1
    assert sampled.decided[0].mask().all() and _wrong(sampled, x * 2.0) == 0


def test_the_evidence_says_how_many_classes_the_sample_covers():
    figures = TilesFigures("bench", 0, 7, 8, 128, ("k",), 4096, 1e-3, 1e-3, classes=3)
    words = check_words(Reason.TILES_SAMPLED, figures)
    assert words.startswith("8 of 128 output blocks covering 3 classes sampled at production")
    report = EvalReport("t", "k.py", ["v5e"], "cpu")
    report.add(Check("tiles", PASS, Reason.TILES_SAMPLED, figures))
    assert report.evidence == [
        "production tiles (pass): 8 of 128 output blocks covering 3 classes, sample seed 7, "
        "inputs seed 0"
    ]


@pytest.mark.slow  # starts candidate and reference workers
def test_eval_rejects_a_kernel_that_skips_one_interior_block_chosen_by_program_ids(
    tmp_path, monkeypatch
):
    """Through the harness (gemm_relu at bench: a 4 x 8 grid of output blocks): exact at check
    and heldout, wrong in block (2, 5) only; today's draw of 4 beside the corners holds it in
    one evaluation of 7, the classes in every one."""
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(tmp_path / "cache"))
    kernel = KernelSource.read(render("skip_one_interior_block", tmp_path))
    with Harness() as harness:
        report = harness.evaluate(kernel, load_task(TASK), EvalOptions(seeds=1, tile_blocks=4))
    assert report.verdict == "rejected"
    assert (report.failure.name, report.failure.reason) == ("tiles", Reason.TILES_OUTSIDE_TOLERANCE)
    assert {"numerics", "heldout"} <= {c.name for c in report.checks if c.status == "pass"}
    tiles = next(c for c in report.checks if c.name == "tiles")
    assert isinstance(tiles.figures, TilesFigures) and tiles.figures.classes == 4


def _control(body, grid):
    """The classes of a kernel's output blocks (one output block per point of a 1-D grid)."""
    x = jax.ShapeDtypeStruct((grid * 8, B), jnp.float32)
    program = pl.pallas_call(
        body,
        grid=(grid,),
        in_specs=[pl.BlockSpec((8, B), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, B), lambda i: (i, 0)),
        out_shape=x,
    )
    (eqn,) = jax.make_jaxpr(program)(x).eqns
    return classes.evaluate(eqn, [], "k")


def _in_order(numbers):
    """Class numbers renamed in the order blocks first show them."""
    names = {}
    return [names.setdefault(int(n), len(names)) for n in numbers]


def test_a_loop_bounded_by_a_program_id_classes_blocks_by_trip_count_none_one_many():
    def body(x_ref, o_ref):
        count = jax.lax.fori_loop(0, pl.program_id(0), lambda t, c: c + 1.0, 0.0)
        o_ref[...] = x_ref[...] + count

    control = _control(body, 8)
    assert control.count == 3 and _in_order(control.classes) == [0, 1, 2, 2, 2, 2, 2, 2]


def test_decisions_inside_a_loop_are_the_set_of_values_they_take():
    def body(x_ref, o_ref):
        hit = jax.lax.fori_loop(0, 4, lambda t, c: c + jnp.where(t == pl.program_id(0), 1, 0), 0)
        o_ref[...] = x_ref[...] * hit.astype(jnp.float32)

    control = _control(body, 8)
    assert control.count == 2 and _in_order(control.classes) == [0, 0, 0, 0, 1, 1, 1, 1]


def test_too_many_classes_run_the_whole_grid_when_it_is_small_else_small_shapes_only():
    many = classes.Control((0, 1), np.arange(100), 100, 0)
    whole = classes.cover((10, 10), many, np.random.default_rng(0), 4, "k")
    assert len(whole) == 100
    with pytest.raises(NotSampleable, match="k's output blocks fall in 300 classes"):
        classes.cover(
            (300,), classes.Control((0,), np.arange(300), 300, 0), np.random.default_rng(0), 4, "k"
        )
    few = classes.Control((0,), np.array([0] * 50 + [1] + [0] * 49), 2, 0)
    sample = classes.cover((100,), few, np.random.default_rng(0), 4, "k")
    assert 50 in sample.ravel() and len(sample) == 7  # two ends, four drawn, the odd one


def _pair_sums(x, semantics="arbitrary"):
    """Grid (64,): step i adds row block i into output block i // 2 (init at even steps), the way
    a flattened or triangular grid moves between output blocks and accumulates on one axis."""

    def body(x_ref, o_ref):
        @pl.when(pl.program_id(0) % 2 == 0)
        def _init():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += x_ref[...]

    steps = x.shape[0] // B
    return pl.pallas_call(
        body,
        grid=(steps,),
        in_specs=[pl.BlockSpec((B, B), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((B, B), lambda i: (i // 2, 0)),
        out_shape=jax.ShapeDtypeStruct((steps // 2 * B, B), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=(semantics,)),
    )(x)


def test_an_axis_that_both_moves_between_blocks_and_accumulates_runs_its_prefixes():
    """One step of such an axis is half an output block. Declared `arbitrary`, the state along it
    is the algorithm: the sampled steps' prefixes run in order and every decided element is the
    whole run's. Declared `parallel`, a core split between two steps of one block would write
    it twice: rejected as state carried from one block to the next."""
    x = mxu_exact(jax.random.normal(jax.random.key(0), (64 * B, B), jnp.float32))
    expected = np.asarray(x).reshape(32, 2, B, B).sum(axis=1).reshape(32 * B, B)
    assert _wrong(_sampled(_pair_sums, x), expected) == 0
    with pytest.raises(KernelFault, match="differs when it started from"):
        _sampled(lambda x: _pair_sums(x, "parallel"), x)
