"""Output blocks kept resident across consecutive grid steps (tiles/classes.py visits): a ragged
kernel's work items, listed by scalar prefetch, where several consecutive items add into one
output block along an `arbitrary` axis (7p's ragged paged attention does this). The sample
takes each such visit whole and poisons only where a visit begins: cutting a visit loses the
block on a TPU and jax's interpreter refuses it ("Revisited block"). Kernels that carry state
from one visit into the next, or keep a block resident along a `parallel` axis, are still
rejected. In-process jax, small grids (seconds)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels.evaluation.tiles import classes, poison
from maxkernel_tui.kernels.evaluation.tiles.sampled_run import KernelFault, run_sampled
from maxkernel_tui.kernels.report.reasons import Reason
from tests.support.placed_tiles import placed

PARAMS = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
B = 128
ROWS = 8
# output block of each work item: runs of 1 to 4 items per block, blocks 0..7 in order
BLOCK_OF_ITEM = [0, 0, 0, 1, 2, 2, 3, 3, 3, 3, 4, 5, 5, 6, 7, 7]
# the input block each item adds
SOURCE_OF_ITEM = [5, 1, 9, 0, 3, 3, 12, 2, 8, 4, 6, 11, 7, 10, 13, 14]
DEPTH = 2  # a reduction axis inside each item, as 7p's blocks of pages


def _first_items() -> list[int]:
    return [int(i == 0 or b != BLOCK_OF_ITEM[i - 1]) for i, b in enumerate(BLOCK_OF_ITEM)]


def _adding(blocks_ref, sources_ref, first_ref, x_ref, o_ref):
    """Honest: zero the block at its first item, add each item's half-blocks over the depth."""
    item, depth = pl.program_id(0), pl.program_id(1)

    @pl.when((first_ref[item] == 1) & (depth == 0))
    def _zero():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...] * (depth + 1).astype(jnp.float32)


def _carrying(blocks_ref, sources_ref, first_ref, x_ref, o_ref, carry_ref):
    """A scan across blocks: each block starts from half of what the previous block ended with
    (kept in scratch), so a block depends on every block before it."""
    item, depth = pl.program_id(0), pl.program_id(1)

    @pl.when((item == 0) & (depth == 0))
    def _start():
        carry_ref[...] = jnp.zeros_like(carry_ref)

    @pl.when((first_ref[item] == 1) & (depth == 0))
    def _begin():
        o_ref[...] = carry_ref[...] * 0.5

    o_ref[...] += x_ref[...] * (depth + 1).astype(jnp.float32)
    carry_ref[...] = o_ref[...]


def _program(body, semantics, scratch=()):
    def program(blocks, sources, first, x):
        return pl.pallas_call(
            body,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=3,
                grid=(len(BLOCK_OF_ITEM), DEPTH),
                in_specs=[pl.BlockSpec((ROWS, B), lambda i, d, blocks, src, first: (src[i], 0))],
                out_specs=pl.BlockSpec((ROWS, B), lambda i, d, blocks, src, first: (blocks[i], 0)),
                scratch_shapes=list(scratch),
            ),
            out_shape=jax.ShapeDtypeStruct((8 * ROWS, B), jnp.float32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=semantics),
        )(blocks, sources, first, x)

    inputs = (
        jnp.array(BLOCK_OF_ITEM, jnp.int32),
        jnp.array(SOURCE_OF_ITEM, jnp.int32),
        jnp.array(_first_items(), jnp.int32),
        jax.random.normal(jax.random.key(4), (15 * ROWS, B), jnp.float32),
    )
    return program, inputs


def _expected(x: np.ndarray) -> np.ndarray:
    out = np.zeros((8 * ROWS, B), np.float32)
    for block, source in zip(BLOCK_OF_ITEM, SOURCE_OF_ITEM, strict=True):
        out[block * ROWS : (block + 1) * ROWS] += 3.0 * x[source * ROWS : (source + 1) * ROWS]
    return out


def _sampled(program, inputs, seed):
    return run_sampled(
        jax.make_jaxpr(program)(*inputs),
        list(inputs),
        np.random.default_rng(seed),
        random_blocks=2,
        params=PARAMS,
    )


@pytest.mark.parametrize("seed", range(4))
def test_items_that_keep_an_output_block_resident_are_sampled_whole_and_verified(seed, monkeypatch):
    """Without prefixes to fall back on (budget 0), each sampled item's block is run over all
    its items: exact, and counted in output blocks, not items."""
    monkeypatch.setattr(poison, "PREFIX_STEPS", 0)
    program, inputs = _program(_adding, ("arbitrary", "arbitrary"))
    sampled = _sampled(program, inputs, seed)
    (kernel,) = sampled.kernels
    assert kernel.of_blocks == 8
    assert 2 <= kernel.blocks < 8
    decided, output = placed(sampled.decided[0])
    assert decided.any()
    expected = _expected(np.asarray(inputs[3]))
    np.testing.assert_allclose(output[decided], expected[decided], rtol=1e-5, atol=1e-5)
    # every decided row block was run with all of its items
    decided_blocks = {r // ROWS for r in np.flatnonzero(decided.any(axis=1))}
    ran_items = {int(row[0]) for row in kernel.ran}
    for block in decided_blocks:
        items = {i for i, b in enumerate(BLOCK_OF_ITEM) if b == block}
        assert items <= ran_items


def test_visits_are_the_runs_of_items_with_one_output_block():
    program, inputs = _program(_adding, ("arbitrary", "arbitrary"))
    (eqn,) = [e for e in jax.make_jaxpr(program)(*inputs).eqns if "pallas" in e.primitive.name]
    control = classes.evaluate(eqn, [np.asarray(a) for a in inputs[:3]], "adding")
    assert control.output_axes == (0,)
    assert control.visits is not None and control.visits.tolist() == BLOCK_OF_ITEM
    assert control.visit_count() == 8
    grown = classes.whole_visits(np.array([[7], [11]]), (16,), control.visits)
    assert grown[:, 0].tolist() == [6, 7, 8, 9, 11, 12]


def test_state_carried_from_one_resident_block_into_the_next_is_caught(monkeypatch):
    """The first item of a block reads what the previous block left: the poison where the visit
    begins shows it. The axis is arbitrary, so the state may be the algorithm (a scan): the
    blocks' prefixes are the fallback, and with no budget for them the kernel is checked at
    small shapes only, saying why."""
    monkeypatch.setattr(poison, "PREFIX_STEPS", 0)
    program, inputs = _program(
        _carrying, ("arbitrary", "arbitrary"), [pltpu.VMEM((ROWS, B), jnp.float32)]
    )
    with pytest.raises(Exception, match="arbitrary grid axes 0") as raised:
        _sampled(program, inputs, 0)
    assert "Revisited" not in str(raised.value)


def test_an_output_block_resident_along_a_parallel_axis_is_rejected():
    """Cores split a parallel axis: a block's items may land on two cores, so its sum is
    undefined. Each item is then its own visit, poisoned: the sum differs."""
    program, inputs = _program(_adding, ("parallel", "arbitrary"))
    with pytest.raises(KernelFault) as fault:
        _sampled(program, inputs, 0)
    assert fault.value.reason == Reason.TILES_STATE_CARRIED
