"""Sizes and constants as expressions over input symbols: multiples, products, reciprocals."""

from fractions import Fraction

import numpy as np
import pytest

from maxkernel_tui.agents.builtin.dims import Dim, DimTable, ShapeLiteral, ShapeRuleError


def table_with_inputs() -> tuple[DimTable, Dim, Dim]:
    table = DimTable()
    rows = table.new_symbol(4096, 256, position=0, axis=0)
    cols = table.new_symbol(8192, 384, position=1, axis=1)
    return table, rows, cols


def test_every_input_size_is_a_symbol_of_its_own_even_when_values_agree():
    table, _, cols = table_with_inputs()
    fixed = table.new_symbol(2, 2, position=0, axis=1)
    assert not fixed.is_const and table.origins[fixed.symbols[0]] == (0, 1)
    twin = table.new_symbol(8192, 384, position=2, axis=0)
    assert twin != cols  # the same values; only the dataflow may say they are one size


def test_other_sizes_are_multiples_products_or_constants():
    table, rows, cols = table_with_inputs()
    assert table.dim(512, 24) == Dim(Fraction(1, 16), cols.symbols)  # groups of 16 features
    assert table.dim(4096 * 8192, 256 * 384) == rows * cols
    assert table.dim(16, 16) == Dim.const(16)
    with pytest.raises(ShapeRuleError, match="126 at bench shapes and 30"):
        table.dim(126, 30)


def test_constants_that_follow_the_shapes_become_size_expressions():
    table, _, cols = table_with_inputs()
    assert table.literal(2.0, 2.0) == 2.0
    assert table.literal(8192.0, 384.0) == ShapeLiteral(cols)
    assert table.literal(1 / 8192, 1 / 384) == ShapeLiteral(cols, reciprocal=True)
    with pytest.raises(ShapeRuleError):
        table.literal(0.3, 0.7)


def test_sizes_render_as_python_over_the_input_shapes():
    table, rows, cols = table_with_inputs()
    names = {rows.symbols[0]: "x_dim0", cols.symbols[0]: "w_dim1"}
    assert table.dim(512, 24).render(names) == "w_dim1 // 16"
    assert (rows * cols).render(names) == "x_dim0 * w_dim1"
    assert ShapeLiteral(cols, reciprocal=True).render(names) == "(1.0 / float(w_dim1))"


def test_a_ratio_of_sizes_is_a_size():
    table = DimTable()
    q_heads = table.new_symbol(64, 8, position=0, axis=1)
    kv_heads = table.new_symbol(8, 2, position=1, axis=1)
    group = table.dim(8, 4)  # query heads per key head
    assert group == Dim(Fraction(1), q_heads.symbols, kv_heads.symbols)
    assert (
        group.render({q_heads.symbols[0]: "q_dim1", kv_heads.symbols[0]: "k_dim1"})
        == "q_dim1 // k_dim1"
    )
    assert (group * kv_heads) == q_heads


def test_a_convolution_output_size_is_its_input_size_shifted():
    table = DimTable()
    height = table.new_symbol(128, 32, position=0, axis=2)
    width = table.new_symbol(128, 128, position=0, axis=3)
    out_height, out_width = table.shifted(height, -2), table.shifted(width, -2)
    assert table.shifts[out_height.symbols[0]] == (height.symbols[0], -2)
    assert table.dim(126, 126) == out_width  # width - 2, never the constant 126
    # A mean's divisor over the output image is out_height * out_width, not 126 * out_height.
    assert table.literal(1 / (126 * 126), 1 / (30 * 126)) == ShapeLiteral(
        out_height * out_width, reciprocal=True
    )


def test_a_convolution_output_follows_taps_that_are_a_size_too():
    table = DimTable()
    height, taps = table.new_symbol(128, 34, 0, 2), table.new_symbol(3, 5, 1, 2)
    out = table.shifted(height, 1, taps)
    assert table.values(out) == (126, 30)
    assert table.shifted(height, 1, Dim.const(3)) == table.shifted(height, -2)


def test_a_static_group_count_is_a_size_a_group_width_can_follow():
    table = DimTable()
    channels = table.new_symbol(64, 64, 1, 0)
    batch = table.new_symbol(128, 64, 0, 0)  # 16 -> 8 is batch / 8 too: a coincidence
    table.static_symbol(16, 8, 5)
    groups = table.dim(16, 8)
    assert groups.symbols == ("t5",) and groups != batch * Dim(Fraction(1, 8))
    assert table.dim(4, 8) == Dim(Fraction(1), channels.symbols, groups.symbols)


def test_a_volumes_count_past_f32s_exact_integers_is_read_to_its_rounding():
    table = DimTable()
    channels, depth = table.new_symbol(24, 120, 0, 1), table.new_symbol(22, 354, 0, 2)
    height, width = table.new_symbol(30, 201, 0, 3), table.new_symbol(30, 273, 0, 4)
    count = 120 * 354 * 201 * 273 // 8  # a group's count at the probe's sizes: 291,367,530
    rounded = float(np.float32(count))
    assert rounded != count  # f32 holds it only to its last place
    volume = channels * depth * height * width * Dim(Fraction(1, 8))
    assert table.literal(24 * 22 * 30 * 30 / 8, rounded) == ShapeLiteral(volume)
    # below 2**24 a constant stays exact: one off is no size
    with pytest.raises(ShapeRuleError):
        table.literal(22.0 * 30, 354.0 * 201 + 1)
