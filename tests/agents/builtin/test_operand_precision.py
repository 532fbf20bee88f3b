"""The rule that projects bf16 operands' rounding error from the small numerics shapes to
production's contraction depth (kernels/rounding_depth.py's Depth), with the figures of the
suite's 41k: 25% of the tolerance at K 512 over 98,304 outputs, and at production K 8192 over
33.5M outputs, where bf16 operands were measured at 111% of it. No jax."""

import math

import pytest

from maxkernel_tui.kernels.rounding_depth import (
    PROJECTED_SHARE_LIMIT,
    Depth,
    projected_share,
)

CHECK_ELEMENTS = 256 * 384  # 41k's check output
BENCH_ELEMENTS = 4096 * 8192  # 41k's production output


def test_the_same_shapes_project_to_the_share_seen():
    same = Depth(512, 512, CHECK_ELEMENTS, CHECK_ELEMENTS)
    assert same.growth() == 1.0
    assert projected_share(0.25, same) == 0.25


@pytest.mark.parametrize(
    ("production_k", "depth_growth"), [(512, 1.0), (2048, 2.0), (8192, 4.0), (32768, 8.0)]
)
def test_the_error_grows_with_the_square_root_of_the_contraction_depth(production_k, depth_growth):
    depth = Depth(512, production_k, CHECK_ELEMENTS, CHECK_ELEMENTS)
    assert depth.growth() == pytest.approx(depth_growth)


def test_more_outputs_raise_the_worst_element_like_the_maximum_of_normal_draws():
    depth = Depth(512, 512, CHECK_ELEMENTS, BENCH_ELEMENTS)
    spread = math.sqrt(math.log(BENCH_ELEMENTS) / math.log(CHECK_ELEMENTS))
    assert depth.growth() == pytest.approx(spread)
    assert 1.2 < spread < 1.3


@pytest.mark.parametrize(
    ("production_k", "bf16_allowed"),
    [(512, True), (2048, True), (4096, True), (8192, False), (16384, False)],
)
def test_41k_s_check_share_allows_bf16_up_to_a_depth_and_not_at_8192(production_k, bf16_allowed):
    projected = projected_share(0.25, Depth(512, production_k, CHECK_ELEMENTS, BENCH_ELEMENTS))
    assert (projected <= PROJECTED_SHARE_LIMIT) == bf16_allowed, projected
    if production_k == 8192:  # measured there: 111%; the projection is in that neighbourhood
        assert 1.0 < projected < 1.4


def test_smaller_production_shapes_are_never_projected_below_what_was_seen():
    shallow = Depth(512, 128, CHECK_ELEMENTS, 1024)
    assert shallow.growth() == 1.0
