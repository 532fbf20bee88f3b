"""The arithmetic of derived configurations: production sizes in, `check` and `heldout` sizes
out. Pure Python; no jax, nothing of the task runs here.

Every size keeps its divisibility by the powers of two it has, up to `POW2_CAP` (a kernel tuned
for production with 1024x2048 blocks still tiles, and the TPU's (8, 128) tile rules keep
holding); sizes up to `KEEP_UP_TO` are kept as they are (head counts, head dims, channels).
Sizes tied together in production (one is the product of two others: pages x page size =
context) stay tied where the size that follows is a count up to KEEP_UP_TO (pages, heads,
experts) or keeps its own divisibility; otherwise equal products are taken for a coincidence.
A task small enough to check at production sizes gets them doubled instead:
a check equal to production would tell no size apart from another it merely equals there (the
built-in agent probes with check), and a kernel hard-coding production would pass it. Doubling
stops where a shape the input code writes would pass `MAX_DOUBLED_ELEMENTS` (a 16x64x256x256
activation doubled is 4 GiB of f32): such a task is checked at its production sizes, and its
held-out run still moves one size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

POW2_CAP = 2048
KEEP_UP_TO = 512
GROW_FROM = 16  # a small task's sizes from here up are doubled; smaller ones are constants
MAX_CHANGED_HELDOUT = 1  # sizes a held-out configuration moves off `check` (keeps it cheap)
MAX_DOUBLED_ELEMENTS = 2**22  # per tensor: 16 MiB of f32, a fraction of a second on a CPU


@dataclass(frozen=True)
class Tie:
    """`total` equals `free` x `other` in production; `free` follows the other two."""

    total: str
    free: str
    other: str


@dataclass(frozen=True)
class DerivedSizes:
    check: dict[str, int]
    heldout: dict[str, int]
    ties: tuple[Tie, ...]
    problems: tuple[str, ...]  # sizes that could not be derived, each with the reason


def pow2_part(n: int) -> int:
    """The largest power of two dividing n, capped at POW2_CAP (1 for odd n)."""
    if n <= 0:
        return 1
    return min(n & -n, POW2_CAP)


def check_size(n: int) -> int:
    """Smallest size near KEEP_UP_TO with n's power-of-two divisibility; small sizes kept."""
    if n <= KEEP_UP_TO:
        return n
    step = pow2_part(n)
    return step * max(1, -(-KEEP_UP_TO // step))


def derive_sizes(
    production: dict[str, int], shapes: tuple[tuple[str | int, ...], ...] = ()
) -> DerivedSizes:
    """`check` and `heldout` for a task's named sizes; `shapes`: the tuples of sizes the input
    code writes (they bound the doubling of a small task)."""
    ties = find_ties(production)
    check = {name: check_size(n) for name, n in production.items()}
    if check == production:
        doubled = {
            name: 2 * n if GROW_FROM <= n <= KEEP_UP_TO else n for name, n in production.items()
        }
        if all(_elements(shape, doubled) <= MAX_DOUBLED_ELEMENTS for shape in shapes):
            check = doubled
    ties = tuple(t for t in ties if _follows(t, check[t.total], check[t.other], production))
    problems = list(_apply_ties(check, ties))
    heldout = dict(check)
    tied = {t.free for t in ties}
    for name in _heldout_moves(production, check, tied):
        heldout[name] = check[name] + pow2_part(production[name])
    problems += [p for p in _apply_ties(heldout, ties) if p not in problems]
    if heldout == check:
        problems.append(
            "no size can move off the check configuration while keeping its divisibility: "
            "heldout equals check"
        )
    return DerivedSizes(check, heldout, ties, tuple(problems))


def find_ties(production: dict[str, int]) -> tuple[Tie, ...]:
    """Sizes equal to the product of two others (each at least 2), largest totals first."""
    ties: list[Tie] = []
    bound: set[str] = set()
    names = sorted(production, key=lambda k: -production[k])
    for total in names:
        for free in names:
            for other in names:
                if len({total, free, other}) < 3 or free in bound or total in bound:
                    continue
                a, b = production[free], production[other]
                if a >= 2 and b >= 2 and a >= b and a * b == production[total]:
                    ties.append(Tie(total, free, other))
                    bound.add(free)
                    break
            else:
                continue
            break
    return tuple(ties)


def _follows(tie: Tie, total: int, other: int, production: dict[str, int]) -> bool:
    """Whether the free size of a tie follows the others, or the product is a coincidence."""
    free = production[tie.free]
    if free <= KEEP_UP_TO or total % other:
        return True
    return (total // other) % pow2_part(free) == 0


def _apply_ties(sizes: dict[str, int], ties: tuple[Tie, ...]) -> list[str]:
    problems = []
    for tie in ties:
        total, other = sizes[tie.total], sizes[tie.other]
        if total % other:
            problems.append(
                f"{tie.total} = {tie.free} x {tie.other} cannot hold at {tie.total}={total}, "
                f"{tie.other}={other}: {tie.free} kept at production size"
            )
            continue
        sizes[tie.free] = total // other
    return problems


def _heldout_moves(production: dict[str, int], check: dict[str, int], tied: set[str]) -> list[str]:
    """Sizes to move off check: first those whose step leaves a non-multiple of check, then the
    largest; never a size tied to others (it follows them)."""
    free = [n for n in production if n not in tied]
    non_multiple = [n for n in free if pow2_part(production[n]) < check[n] < production[n]]
    room = [n for n in free if check[n] < production[n] and n not in non_multiple]
    room.sort(key=lambda n: -production[n])
    moves = (non_multiple + room)[:MAX_CHANGED_HELDOUT]
    if moves:
        return moves
    # check is at or above production everywhere (a small task): grow the smallest size that
    # is no constant, once, which keeps the held-out run cheap
    growable = sorted((n for n in free if production[n] >= GROW_FROM), key=lambda n: production[n])
    return growable[:1]


def _elements(shape: tuple[str | int, ...], sizes: dict[str, int]) -> int:
    return math.prod(sizes.get(part, 1) if isinstance(part, str) else part for part in shape)
