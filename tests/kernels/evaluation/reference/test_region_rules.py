"""Each operation that changes shapes or reads along an axis (evaluation/region_rules.py): the
reference over a random box, computed from the regions the box pulls back, equals the whole
reference there, in several styles of the operation; the regions read are smaller than the whole
where the box allows; an operation not followed is still refused (the reference is then computed
whole). In-process jax, small shapes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from maxkernel_tui.kernels.evaluation.reference import slices as reference_slices

pytestmark = pytest.mark.slow  # jax in this process: about a second per case


def _random_box(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    box = []
    for n in shape:
        a = int(rng.integers(0, n))
        box.append((a, int(rng.integers(a + 1, n + 1))))
    return tuple(box)


def _same_on_random_boxes(reference, *shapes, boxes: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    closed = jax.make_jaxpr(reference)(*inputs)
    whole = [np.asarray(o) for o in jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *inputs)]
    for number, output in enumerate(whole):
        for _ in range(boxes):
            box = _random_box(rng, output.shape)
            got = np.asarray(reference_slices.output_in_box(closed, inputs, number, box))
            want = output[tuple(slice(a, b) for a, b in box)]
            assert got.shape == want.shape, box
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(box))
    return closed, inputs


@pytest.mark.parametrize(
    ("reference", "shape"),
    [
        (lambda x: x.reshape(24, 8), (4, 6, 8)),  # merge
        (lambda x: x.reshape(4, 2, 3, 8), (4, 6, 8)),  # split
        (lambda x: x.reshape(2, 2, 48), (4, 6, 8)),  # split and merge
        (lambda x: x.reshape(4, 6), (6, 4)),  # one group, no finer common sizes
        (lambda x: x.reshape(4, 1, 6, 1), (1, 4, 6)),  # size-1 dimensions moved
        (lambda x: x.reshape(()), (1, 1)),
        (lambda x: (x @ x.T).reshape(2, 3, 6) * 2.0, (6, 5)),  # of a computed value
        # grouped heads: (b, s, h, d) -> (b, s, kv, g, d), attention per group, merged back
        (
            lambda q: (
                jnp.einsum("bskgd,btkd->bkgst", q.reshape(2, 5, 2, 3, 4), q[:, :, :2])
                .reshape(2, 6, 5, 5)
                .sum(-1)
            ),
            (2, 5, 6, 4),
        ),
    ],
    ids=["merge", "split", "split-merge", "regroup", "ones", "scalar", "computed", "heads"],
)
def test_reshape(reference, shape):
    _same_on_random_boxes(reference, shape)


@pytest.mark.parametrize(
    "reference",
    [
        lambda x: x[1:7:2, ::3],
        lambda x: x[:, -3:],
        lambda x: jax.lax.pad(x, 0.5, ((1, 2, 0), (-2, 3, 1))),
        lambda x: jax.lax.pad(x, 0.0, ((0, 0, 2), (3, -1, 0))),
        lambda x: jnp.concatenate([x, 2 * x[:, :3], x[:, :1]], axis=1),
        lambda x: jnp.concatenate([x, -x], axis=-2),
        lambda x: jnp.split(x, [2, 5], axis=0),
        lambda x: jnp.flip(x, (0, 1)),
        lambda x: jnp.cumsum(x, axis=-1),
        lambda x: jax.lax.cumsum(x, axis=0, reverse=True),
        lambda x: jax.lax.cummax(x, axis=1),
        lambda x: jax.lax.cumlogsumexp(x, axis=0, reverse=True),
        lambda x: jnp.sort(x, axis=0),
        lambda x: jax.lax.sort((x, -x), dimension=1, num_keys=1),
        lambda x: jax.lax.top_k(x, 3),
        lambda x: jnp.argmax(x, axis=-1),
        lambda x: jnp.expand_dims(x, (0, 2)) + jnp.ones((3, 1, 1, 1)),
        lambda x: jax.nn.relu(x) + jax.checkpoint(jnp.sin)(x),
    ],
    ids=[
        "strided-slice",
        "negative-slice",
        "pad-interior-negative",
        "pad-interior-rows",
        "concatenate",
        "concatenate-negative-axis",
        "split",
        "rev",
        "cumsum",
        "cumsum-reverse",
        "cummax",
        "cumlogsumexp-reverse",
        "sort",
        "sort-two-operands",
        "top_k",
        "argmax",
        "expand-dims-broadcast",
        "custom-jvp-checkpoint",
    ],
)
def test_an_operation_along_dimensions(reference):
    _same_on_random_boxes(reference, (8, 9))


def _conv(**options):
    def reference(x, w):
        return jax.lax.conv_general_dilated(x, w, **options)

    return reference


@pytest.mark.parametrize(
    ("reference", "shapes"),
    [
        (
            _conv(
                window_strides=(1, 1), padding="SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")
            ),
            [(2, 3, 9, 10), (4, 3, 3, 3)],
        ),
        (
            _conv(
                window_strides=(1, 1), padding="VALID", dimension_numbers=("NCHW", "OIHW", "NCHW")
            ),
            [(2, 3, 9, 10), (4, 3, 3, 2)],
        ),
        (
            _conv(
                window_strides=(2, 3),
                padding=((2, 1), (0, 3)),
                rhs_dilation=(2, 1),
                dimension_numbers=("NHWC", "HWIO", "NHWC"),
            ),
            [(2, 11, 12, 3), (3, 2, 3, 5)],
        ),
        (
            _conv(
                window_strides=(1,),
                padding=((-1, 2),),
                feature_group_count=2,
                dimension_numbers=("NCH", "OIH", "NCH"),
            ),
            [(2, 4, 13), (6, 2, 3)],
        ),
        (
            _conv(
                window_strides=(1, 1, 1),
                padding="VALID",
                dimension_numbers=("NCDHW", "OIDHW", "NCDHW"),
            ),
            [(1, 2, 6, 5, 7), (3, 2, 3, 2, 3)],
        ),
    ],
    ids=["same", "valid", "strided-dilated-nhwc", "grouped-negative-padding", "3d"],
)
def test_convolution_by_its_window(reference, shapes):
    closed, _ = _same_on_random_boxes(reference, *shapes)
    if shapes[0] == (2, 3, 9, 10):  # one output row of one image reads three input rows of it
        program = reference_slices.box_program(closed, 0, ((1, 2), (0, 2), (4, 5), (0, 10)))
        assert program.regions[0][0] == (1, 2) and program.regions[0][2] in [(3, 6), (4, 7)]


@pytest.mark.parametrize(
    "reference",
    [
        lambda x: jnp.take_along_axis(x, (jnp.arange(8)[:, None] * 5 + jnp.arange(3)) % 9, axis=1),
        lambda x: x[jnp.array([6, 0, 3, 3]), 1:7],
        lambda x: x[(jnp.arange(8) * 3) % 8],
        lambda x: jax.vmap(lambda row, i: row[i])(x, jnp.arange(8) % 4),
        lambda x: x.at[jnp.array([1, -1, 9])].get(mode="fill", fill_value=-3.0),
    ],
    ids=["take-along-axis", "rows-and-slice", "permuted-rows", "vmapped", "fill"],
)
def test_gather_reads_the_operand_whole_where_it_is_indexed(reference):
    _same_on_random_boxes(reference, (8, 9))


def test_custom_vjp_body_is_followed():
    @jax.custom_vjp
    def scaled(x):
        return x @ x.T * 3.0

    scaled.defvjp(lambda x: (scaled(x), x), lambda x, g: (g @ x,))
    closed, _ = _same_on_random_boxes(scaled, (6, 4))
    # one row of the result reads one row and the whole of x: no more than the box needs
    program = reference_slices.box_program(closed, 0, ((2, 3), (0, 6)))
    assert program.regions == [((0, 6), (0, 4))]


def test_grouped_heads_read_only_the_kv_head_of_the_box():
    """GQA's query heads split as (kv head, member): a box of two query heads of one kv head
    reads that kv head's keys and those queries, and the box's rows of the result cost their
    share of the matmul flops."""

    def attention(q, k):  # q (s, 8, d), k (s, 2, d); query head h uses kv head h // 4
        logits = jnp.einsum("skgd,tkd->kgst", q.reshape(16, 2, 4, 8), k)
        return jax.nn.softmax(logits, axis=-1).reshape(8, 16, 16)

    closed, _ = _same_on_random_boxes(attention, (16, 8, 8), (16, 2, 8))
    program = reference_slices.box_program(closed, 0, ((5, 7), (0, 4), (0, 16)))
    assert program.regions == [((0, 4), (5, 7), (0, 8)), ((0, 16), (1, 2), (0, 8))]


@pytest.mark.parametrize(
    ("reference", "operation"),
    [
        (lambda x, w: jnp.zeros((8, 8)).at[jnp.arange(8) % 3].add(x @ w), "scatter-add"),
        (  # a transposed convolution dilates its input
            lambda x, w: jax.lax.conv_transpose(
                (x @ w)[None, None],
                jnp.ones((1, 1, 3, 3)),
                (2, 2),
                "SAME",
                dimension_numbers=("NCHW", "OIHW", "NCHW"),
            )[0, 0],
            "input dilation",
        ),
    ],
    ids=["scatter", "transposed-convolution"],
)
def test_an_operation_it_does_not_follow_is_refused_not_guessed(reference, operation):
    x, w = np.ones((8, 16), np.float32), np.ones((16, 8), np.float32)
    closed = jax.make_jaxpr(reference)(x, w)
    with pytest.raises(reference_slices.NotSliceable, match=operation):
        reference_slices.output_in_box(closed, [x, w], 0, ((0, 2), (0, 4)))
