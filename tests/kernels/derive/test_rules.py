"""The arithmetic of derived sizes: divisibility kept, ties kept, held-out shapes differ."""

from maxkernel_tui.kernels.derive.rules import POW2_CAP, check_size, derive_sizes, pow2_part


def test_a_size_keeps_its_powers_of_two_up_to_2048():
    for production in (4096, 8192, 28672, 3 * 1024, 3000, 24576):
        derived = check_size(production)
        assert derived <= production
        assert derived % min(pow2_part(production), POW2_CAP) == 0
    assert check_size(8192) == 2048 and check_size(3000) == 512 and check_size(128) == 128


def test_a_large_gemm_checks_at_2048_cubed_and_holds_out_one_size_moved():
    derived = derive_sizes({"M": 4096, "K": 8192, "N": 8192})
    assert derived.check == {"M": 2048, "K": 2048, "N": 2048}
    moved = [k for k in derived.heldout if derived.heldout[k] != derived.check[k]]
    assert len(moved) == 1 and all(v % 2048 == 0 for v in derived.heldout.values())


def test_a_size_with_an_odd_part_is_held_out_at_a_non_multiple_of_check():
    derived = derive_sizes({"rows": 3000, "cols": 64})
    assert derived.check["rows"] == 512 and derived.heldout["rows"] == 520
    assert derived.heldout["rows"] % derived.check["rows"] != 0


def test_a_small_task_is_checked_at_doubled_sizes_so_equal_sizes_can_be_told_apart():
    derived = derive_sizes({"M": 256, "K": 512, "N": 256, "k": 3})
    assert derived.check == {"M": 512, "K": 1024, "N": 512, "k": 3}
    assert derived.heldout != derived.check and derived.heldout["k"] == 3


def test_a_task_whose_doubled_tensor_would_be_huge_is_checked_at_production_sizes():
    production = {"batch": 16, "features": 64, "dim1": 256, "dim2": 256}
    derived = derive_sizes(production, shapes=(("batch", "features", "dim1", "dim2"),))
    assert derived.check == production
    assert derived.heldout != derived.check
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
