"""How the built-in agent reads the engineer's words and picks its next kernel (no jax: the
kernels' text only): what the words ask, the latest words first; the kernel on offer that grants
it, never one turned down, never one that goes against it; none when all were turned down."""

from __future__ import annotations

from maxkernel_tui.agents.builtin.steering import Offer, Wish, choose, heard, wishes

REASON = "fuse the sigmoid and row sum into the matmul epilogue"


def offer(family: str, rows: int) -> Offer:
    source = f"# Tunables\nBLOCK_ROWS = {rows}\nBLOCK_COLS = 512\n\n# {family}\n"
    return Offer(source, family, "autotuned")


SPLIT = offer("multi-stage (matmul+row-wise)", 128)
FUSED = offer("matmul + row-wise epilogue", 128)
FUSED_SMALL = offer("matmul + row-wise epilogue", 64)
SPLIT_SMALL = offer("multi-stage (matmul+row-wise)", 64)


def test_what_the_words_ask_the_latest_first() -> None:
    assert wishes([REASON]) == [Wish.FUSE]
    assert wishes(["use smaller blocks", "no: larger blocks, fewer grid steps"]) == [Wish.LARGER]
    assert wishes(["put the row sum in its own pallas_call"]) == [Wish.SPLIT]
    assert wishes(["this looks wrong"]) == []


def test_a_fused_kernel_answers_a_rejected_split_one() -> None:
    choice = choose([SPLIT, SPLIT_SMALL, FUSED], [SPLIT.source], [Wish.FUSE], SPLIT)
    assert choice.offer == FUSED
    assert choice.notes == (f"{Wish.FUSE}: done",)


def test_asked_to_fuse_what_is_fused_it_says_so_and_never_offers_a_split_kernel() -> None:
    choice = choose([FUSED, SPLIT, FUSED_SMALL], [FUSED.source], [Wish.FUSE], FUSED)
    assert choice.offer == FUSED_SMALL  # another tiling, still one pallas_call
    assert "already runs as one pallas_call" in choice.notes[0]
    assert "already runs as one pallas_call" in heard([REASON], [Wish.FUSE], choice.notes)


def test_nothing_is_offered_when_every_kernel_was_turned_down() -> None:
    offers = [FUSED, SPLIT]
    choice = choose(offers, [o.source for o in offers], [], FUSED)
    assert choice.offer is None
