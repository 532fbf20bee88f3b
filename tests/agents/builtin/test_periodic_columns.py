"""Values per position along a convolution's trailing pixel axes (a LayerNorm's weights over the
width, 28k's): their kind in a convolution's frame, what it refuses (a value with a unit axis
between its sizes broadcasts otherwise; a period that does not divide the columns; values of
two periods; a reduction of one), and the convolution's kernel taking them in its epilogue,
repeated over a plane's pixels by XLA outside."""

from __future__ import annotations

from fractions import Fraction

from maxkernel_tui.agents.builtin.dims import Dim
from maxkernel_tui.agents.builtin.draft import plan_task
from maxkernel_tui.agents.builtin.layout import (
    COL,
    PERIODIC_COL,
    TILE,
    Frame,
    Kind,
    classify,
    join,
    same_layout,
)
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task

N, C, D, H, W = (Dim(Fraction(1), (name,)) for name in "ncdhw")
ONE = Dim.const(1)
VOLUME = Frame((N,), (C,), D * H * W)


def test_a_value_on_the_trailing_axes_is_periodic_in_a_convolutions_columns():
    assert classify((W,), VOLUME) == Kind(PERIODIC_COL, W)
    assert classify((ONE, ONE, ONE, ONE, W), VOLUME) == Kind(PERIODIC_COL, W)
    assert classify((H, W), VOLUME) == Kind(PERIODIC_COL, H * W)


def test_values_that_broadcast_otherwise_are_not_periodic():
    assert classify((H, ONE), VOLUME) is None  # per row of a plane: its width broadcast
    assert classify((D, ONE, W), VOLUME) is None  # a unit axis between its sizes
    other = Dim(Fraction(1), ("k",))
    assert classify((other,), VOLUME) is None  # a size no product of the columns' divides
    assert classify((D * H * W,), VOLUME) == Kind(COL)  # every column: an ordinary column value


def test_periodic_columns_join_tiles_and_rows_but_not_columns_of_another_period():
    tile = Kind(TILE, W, batched=True)
    assert join([tile, Kind(PERIODIC_COL, W)]) == Kind(TILE, W, True)
    assert join([Kind("row"), Kind(PERIODIC_COL, W)]) == Kind(TILE, W)
    assert join([Kind(COL), Kind(PERIODIC_COL, W)]) is None
    assert join([tile, Kind(PERIODIC_COL, H * W)]) is None  # the tile is grouped by W
    assert not same_layout(Kind(PERIODIC_COL, W), Kind(PERIODIC_COL, H * W))


def test_28ks_layernorm_weights_ride_in_the_transposed_convolutions_epilogue():
    (plan, *_) = plan_task(
        load_task(builtin_suite_dir() / "28k_ConvTranspose3d_LayerNorm_GELU_Scaling")
    )
    source = " ".join(plan.render(plan.start).split())
    assert source.count("pl.pallas_call(") == 1  # no second stage over a relaid copy
    # the weights of the output width repeated over a plane's pixels, outside the kernel
    assert "jnp.tile(ln_weight, 2 * x_dim3).reshape(1, 4 * x_dim3 * x_dim4)" in source
