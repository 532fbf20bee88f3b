"""The reference's outputs over boxes, computed from the regions each box needs, equal the whole
reference's there: on suite references of every kind the slicer follows (matmuls with bias and
activation, bf16, batched, several matmuls, row reductions, softmax, grouped-query heads split
and merged by reshapes, cumulative sums), at boxes on the edges and inside (each operation alone:
test_region_rules.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation.reference import slices as reference_slices
from maxkernel_tui.kernels.evaluation.reference import worker as reference_worker
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task

pytestmark = pytest.mark.slow  # jax in this process: a few seconds per reference


def test_boxes_cover_every_index_and_keep_apart_what_is_apart():
    shape = (8, 10)
    grid = np.arange(80).reshape(shape)
    first, last = grid[0:2, 0:3].reshape(-1), grid[6:8, 7:10].reshape(-1)
    found = reference_slices.boxes(np.concatenate([first, last]), shape)
    assert found == [((0, 2), (0, 3)), ((6, 8), (7, 10))]  # not the 8x10 box around both
    touching = np.concatenate([grid[0:2, 0:3].reshape(-1), grid[2:4, 0:3].reshape(-1)])
    assert reference_slices.boxes(touching, shape) == [((0, 4), (0, 3))]
    scattered = np.array([3, 77, 41])
    boxes = reference_slices.boxes(scattered, shape)
    for index in scattered:
        point = np.unravel_index(index, shape)
        assert any(all(a <= p < b for p, (a, b) in zip(point, box)) for box in boxes)
    assert reference_slices.boxes(np.array([], np.int64), shape) == []


def test_sampled_blocks_of_a_grid_come_back_one_box_each():
    """Blocks in consecutive batches and rows but not stacked: each its own box, not the product
    of their batches, rows and columns (which made 2p's twelve blocks cost 16 times their
    flops)."""
    shape = (4, 8, 6, 2)
    grid = np.arange(np.prod(shape)).reshape(shape)
    blocks = [((0, 1), (0, 2), (1, 2)), ((1, 2), (2, 4), (3, 4)), ((2, 3), (4, 6), (1, 2))]
    blocks.append(((3, 4), (6, 8), (5, 6)))
    indices = np.concatenate(
        [grid[tuple(slice(a, b) for a, b in block)].reshape(-1) for block in blocks]
    )
    found = reference_slices.boxes(indices, shape)
    assert sorted(found) == sorted((*block, (0, 2)) for block in blocks)


def _traced(task_id: str, config: str = "check"):
    task = load_task(next(builtin_suite_dir().glob(f"{task_id}_*")))
    module = runtime.load_reference(task)
    dynamic, static = runtime.make_inputs(task, module, config, 3)
    leaves = [np.asarray(leaf) for leaf in jax.tree.leaves(dynamic)]
    structure = jax.tree.structure(dynamic)
    closed = jax.make_jaxpr(
        lambda *x: module.computation(*jax.tree.unflatten(structure, x), *static)
    )(*leaves)
    return closed, leaves


@pytest.mark.parametrize(
    "task_id", ["41k", "8p", "26k", "9p", "12p", "50k", "36k", "1p", "5p", "2p", "4p", "16p", "45k"]
)
def test_an_output_box_equals_the_whole_reference_there(task_id):
    closed, inputs = _traced(task_id)
    with jax.default_matmul_precision("highest"):
        whole = [
            np.asarray(o, np.float64)
            for o in jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *inputs)
        ]
        for number, output in enumerate(whole):
            shape = output.shape
            # the first and last elements' corners and one inside, each a few elements wide
            corners = [tuple(min(3, n) for n in shape), tuple((max(n - 2, 0), n) for n in shape)]
            boxes = [
                tuple((0, n) for n in corners[0]),
                corners[1],
                tuple((n // 3, n // 3 + max(n // 4, 1)) for n in shape),
            ]
            for box in boxes:
                got = reference_slices.output_in_box(closed, inputs, number, box)
                want = output[tuple(slice(a, b) for a, b in box)]
                assert got.shape == want.shape, (task_id, box)
                # bf16 results: another matmul shape may round one element the other way
                tol = 1e-2 if closed.out_avals[number].dtype.itemsize == 2 else 1e-4
                np.testing.assert_allclose(
                    np.asarray(got, np.float64), want, rtol=tol, atol=tol / 10
                )


@pytest.mark.parametrize(
    "reference",
    [
        lambda x: jnp.sum(x, axis=1),
        lambda x: jnp.max(x, axis=0),
        lambda x: jnp.prod(x, axis=1),
        lambda x: jnp.argmax(x, axis=1),
        lambda x: jnp.any(x > 0.5, axis=1),
        lambda x: jnp.all(x > 0.1, axis=0),
    ],
    ids=["sum", "max", "prod", "argmax", "any", "all"],
)
def test_every_reduction_over_axes_is_followed(reference):
    """Each of perf/primitive_names.AXIS_REDUCTIONS: a box of the result reads the operand whole
    along the reduced axes and equals the whole reduction there."""
    x = np.random.default_rng(0).uniform(size=(12, 10)).astype(np.float32)
    closed = jax.make_jaxpr(reference)(x)
    whole = np.asarray(reference(x))
    got = reference_slices.output_in_box(closed, [x], 0, ((2, 5),))
    np.testing.assert_array_equal(np.asarray(got), whole[2:5])


def test_values_at_indices_come_from_the_box_holding_each():
    """The worker's values at a sample's flat indices (sorted, as the judge gives them, or not),
    each from the box holding it."""
    rng = np.random.default_rng(0)

    class _Box:
        def __init__(self, box, whole):
            self.box, self.whole = box, whole

        def run(self, _inputs):
            return self.whole[tuple(slice(a, b) for a, b in self.box)]

    for trial in range(200):
        shape = tuple(int(n) for n in rng.integers(1, 7, size=int(rng.integers(0, 4))))
        whole = np.asarray(rng.normal(size=shape), np.float32)
        indices = rng.integers(0, whole.size, size=int(rng.integers(1, whole.size + 2)))
        if trial % 2:
            indices = np.unique(indices)
        found = reference_worker._at_indices(
            [(box, _Box(box, whole)) for box in reference_slices.boxes(indices, shape)],
            [],
            indices,
            shape,
        )
        np.testing.assert_array_equal(found, whole.reshape(-1)[indices])
