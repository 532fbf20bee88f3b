"""The arithmetic of derived sizes: divisibility kept, ties kept, held-out shapes differ."""

import math

from maxkernel_tui.kernels.derive.rules import (
    MAX_CHECK_ELEMENTS,
    POW2_CAP,
    check_size,
    derive_sizes,
    pow2_part,
)


def test_a_size_keeps_its_powers_of_two_up_to_2048():
    for production in (4096, 8192, 28672, 3 * 1024, 3000, 24576):
        derived = check_size(production)
        assert derived <= production
        assert derived % min(pow2_part(production), POW2_CAP) == 0
    assert check_size(8192) == 2048 and check_size(3000) == 512 and check_size(128) == 128


def test_a_large_gemm_checks_at_2048_cubed_and_holds_out_the_sizes_of_one_value_moved():
    derived = derive_sizes({"M": 4096, "K": 8192, "N": 8192})
    assert derived.check == {"M": 2048, "K": 2048, "N": 2048}
    moved = [k for k in derived.heldout if derived.heldout[k] != derived.check[k]]
    # K and N are equal in production: they may meet in a contraction, so they move together
    assert moved == ["K", "N"] and derived.heldout["K"] == derived.heldout["N"]
    assert all(v % 2048 == 0 for v in derived.heldout.values())


def test_a_size_with_an_odd_part_is_held_out_at_a_non_multiple_of_check():
    derived = derive_sizes({"rows": 3000, "cols": 64})
    assert derived.check["rows"] == 512 and derived.heldout["rows"] == 520
    assert derived.heldout["rows"] % derived.check["rows"] != 0


def test_a_small_task_is_checked_at_doubled_sizes_so_equal_sizes_can_be_told_apart():
    derived = derive_sizes({"M": 256, "K": 512, "N": 256, "k": 3})
    assert derived.check == {"M": 512, "K": 1024, "N": 512, "k": 3}
    assert derived.heldout != derived.check and derived.heldout["k"] == 3


def test_a_task_whose_tensor_is_huge_at_kept_sizes_is_checked_at_halved_ones_that_fit():
    production = {"batch": 16, "features": 64, "dim1": 256, "dim2": 256}
    shape = ("batch", "features", "dim1", "dim2")
    derived = derive_sizes(production, shapes=(shape,))
    assert derived.check == {"batch": 2, "features": 64, "dim1": 256, "dim2": 256}
    assert derived.heldout != derived.check
    for sizes in (derived.check, derived.heldout):
        assert math.prod(sizes[n] for n in shape) <= MAX_CHECK_ELEMENTS
    small = derive_sizes({"M": 256, "K": 512, "N": 256}, shapes=(("M", "K"), ("K", "N"), ("N",)))
    assert small.check == {"M": 512, "K": 1024, "N": 512}  # small tensors: still doubled


def test_pages_times_page_size_stays_equal_to_the_context():
    derived = derive_sizes({"num_pages": 512, "page_size": 16, "context": 8192})
    for sizes in (derived.check, derived.heldout):
        assert sizes["num_pages"] * sizes["page_size"] == sizes["context"]
    assert [(t.total, t.free, t.other) for t in derived.ties] == [
        ("context", "num_pages", "page_size")
    ]


def test_a_coincident_product_of_large_sizes_is_not_taken_for_a_tie():
    derived = derive_sizes({"batch": 4, "seq": 1024, "hidden": 4096})
    assert derived.ties == () and derived.check["seq"] == 1024


def test_sizes_that_cannot_move_say_so():
    derived = derive_sizes({"k": 3, "groups": 2})
    assert derived.heldout == derived.check
    assert "heldout equals check" in derived.problems[-1]


def test_a_group_count_keeps_dividing_its_size_and_a_literal_size_is_pinned():
    # GroupNorm(48 groups) over 3072 channels: 1024 (the power-of-two rule alone) breaks it
    derived = derive_sizes({"batch": 4096, "hidden": 3072}, divisors=(48,))
    for sizes in (derived.check, derived.heldout):
        assert sizes["hidden"] % 48 == 0 and sizes["hidden"] >= 48
    # the group count named as a size of its own (kept constant) divides the size as well
    named = derive_sizes({"batch": 64, "hidden": 3072, "groups": 48})
    assert named.check["hidden"] % named.check["groups"] == 0
    assert named.heldout["hidden"] % named.heldout["groups"] == 0
    # a size the reference writes as a literal (`x.reshape(-1, 8192)`) never moves
    pinned = derive_sizes({"rows": 4096, "cols": 8192}, divisors=(8192,))
    assert pinned.check["cols"] == pinned.heldout["cols"] == 8192


def test_without_the_divisor_rule_the_group_count_would_break():
    """The attack the rule answers: powers of two alone give 1024 channels for 48 groups."""
    assert check_size(3072) % 48 != 0
    assert check_size(3072, (48,)) % 48 == 0


def test_equal_sizes_stay_equal_in_check_and_heldout_so_a_contraction_holds():
    production = {"batch": 4096, "d_model": 8192, "d_ff": 28672, "d_in": 8192}
    derived = derive_sizes(production)
    for sizes in (derived.check, derived.heldout):
        assert sizes["d_model"] == sizes["d_in"]
    assert derived.heldout != derived.check


def test_a_traced_group_of_different_values_keeps_its_ratios():
    """28k: weights of out_channels (64) broadcast over twice W (32); the budget halves W with
    the other sizes of 32: out_channels follows it instead of staying at 64."""
    production = {"batch": 32, "c_in": 32, "c_out": 64, "d": 16, "h": 32, "w": 32}
    shapes = (("batch", "c_in", "d", "h", "w"), ("c_in", "c_out", 4, 4, 4))
    static = derive_sizes(production, shapes)
    assert static.check["c_out"] != 2 * static.check["w"]  # the break the trace answers
    traced = derive_sizes(production, shapes, groups=(("c_out", "w"),))
    for sizes in (traced.check, traced.heldout):
        assert sizes["c_out"] == 2 * sizes["w"], sizes
    assert traced.heldout != traced.check


def test_the_budget_never_takes_a_large_size_below_its_tiles():
    """Shrinking to fit the budget, a size above 512 keeps its powers of two up to 512 (a
    kernel's fixed 256 x 512 tiles divide it); the counts beside it shrink instead."""
    production = {"seq": 4096, "heads": 64}
    derived = derive_sizes(production, shapes=(("seq", "seq", "heads"),))
    assert derived.check["seq"] % 512 == 0 and derived.heldout["seq"] % 512 == 0
    assert derived.check["heads"] < 64
    assert derived.check["seq"] ** 2 * derived.check["heads"] <= MAX_CHECK_ELEMENTS // 2
