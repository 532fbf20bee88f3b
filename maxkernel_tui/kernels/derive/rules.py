"""The arithmetic of derived configurations: production sizes in, `check` and `heldout` sizes
out. Pure Python; no jax, nothing of the task runs here.

Every size keeps its divisibility by the powers of two it has, up to `POW2_CAP` (a kernel tuned
for production with 1024x2048 blocks still tiles, and the TPU's (8, 128) tile rules keep
holding), and by every divisor the reference's code writes or the task keeps constant (a group
count of 512 or 48, a head count of 24: `hidden // groups` keeps dividing); sizes up to
`KEEP_UP_TO` are kept as they are (head counts, head dims, channels), and a size the reference
writes as a literal is pinned (it never moves).
Every rule is a function of a size's production value, so sizes equal in production (the two
sides of a contraction, a weight's rows and an input's columns) stay equal in `check`, and the
held-out configuration moves all sizes of one production value together, unless tracing the
reference told which of them it ties (tie_probe.py): then every group of them that is free of
the others gets a held-out value of its own wherever the budget and the group counts allow. A
traced group of sizes of different values (a broadcast of 64 weights over twice a width of 32)
keeps its production ratios: its sizes take the smallest scale any of them took, and stay there
at heldout.
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
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

POW2_CAP = 2048
KEEP_UP_TO = 512
# a size above KEEP_UP_TO keeps its production's powers of two up to here even where the budget
# shrinks it (a kernel's fixed 256 x 512 tiles divide every derived size)
TILE_FLOOR = 512
GROW_FROM = 16  # a small task's sizes from here up are doubled; smaller ones are constants
MAX_DOUBLED_ELEMENTS = 2**22  # per tensor: 16 MiB of f32, a fraction of a second on a CPU
# per tensor at check and heldout: 64 MiB of f32. A conv task whose sizes are all small enough
# to keep (64x64x128x128) would otherwise be validated at production size, and its held-out
# run grown past it, until the machine's memory runs out
MAX_CHECK_ELEMENTS = 2**24


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


def size_step(n: int, divisors: tuple[int, ...] = ()) -> int:
    """What a derived size stays a multiple of: n's powers of two (up to POW2_CAP) and every
    divisor of n among `divisors`."""
    return math.lcm(pow2_part(n), *(d for d in divisors if d >= 2 and n % d == 0))


def check_size(n: int, divisors: tuple[int, ...] = ()) -> int:
    """Smallest size near KEEP_UP_TO that keeps n's step; small sizes kept."""
    if n <= KEEP_UP_TO:
        return n
    step = size_step(n, divisors)
    return min(n, step * max(1, -(-KEEP_UP_TO // step)))


def derive_sizes(
    production: dict[str, int],
    shapes: tuple[tuple[str | int, ...], ...] = (),
    divisors: tuple[int, ...] = (),
    groups: tuple[tuple[str, ...], ...] = (),
    twins: dict[str, str] | None = None,
) -> DerivedSizes:
    """`check` and `heldout` for a task's sizes; `shapes`: the tuples of sizes the input code
    writes (they bound the doubling of a small task); `divisors`: the integer literals of the
    reference (a size equal to one is pinned, a size one divides stays divisible); `groups`:
    where known from tracing the reference (tie_probe.py), which sizes of one production value
    must move together (without them, all sizes of a value do); `twins`: a literal size ->
    the first literal of its value (`dim_64_2` -> `dim_64`): it is never taken for a factor
    of a product beside its first, and follows its first where that one follows a product."""
    twins = twins or {}
    ties = find_ties({n: v for n, v in production.items() if n not in twins})
    ties += tuple(
        Tie(t.total, twin, t.other) for t in ties for twin in twins if twins[twin] == t.free
    )
    # sizes kept constant divide the sizes around them too (a named num_groups = 512)
    kept = tuple(n for n in production.values() if n <= KEEP_UP_TO)
    factors = tuple(sorted(set(divisors) | set(kept)))
    pinned = _pinned(production, divisors)
    check = {
        name: n if name in pinned else check_size(n, factors) for name, n in production.items()
    }
    divisions = _divisions(production)
    if check == production:
        check = _doubled(production, shapes, pinned, divisions)
    check = _within_budget(check, shapes, pinned, divisions, production)
    scaled = [g for g in groups if len({production[n] for n in g if n in production}) > 1]
    check = _scaled_together(check, production, scaled)
    ties = tuple(t for t in ties if _follows(t, check[t.total], check[t.other], production))
    problems = list(_apply_ties(check, ties))
    tied = {t.free for t in ties} | pinned | {n for g in scaled for n in g}
    heldout = dict(check)

    def step(name: str) -> int:
        # a size shrunk below its own step (to fit the budget) moves by its check's step
        return min(size_step(production[name], factors), size_step(check[name], factors))

    for names in _heldout_moves(production, check, tied, groups, shapes):
        moved = dict(check)
        for name in names:
            moved[name] = check[name] + step(name)
        _apply_ties(moved, ties)
        # traced groups stand for what the reference ties; sizes merely dividing one another in
        # production (256 and 512) may then part, the traced held-out shapes say if they may not
        holding = divisions if not groups else []
        if not _broken(moved, holding) and _largest(shapes, moved) <= MAX_CHECK_ELEMENTS:
            heldout = moved
            break
    if groups:
        heldout = _parted(heldout, production, groups, tied, step, ties, shapes, divisions)
    problems += [p for p in _apply_ties(heldout, ties) if p not in problems]
    if heldout == check:
        problems.append(
            "no size can move off the check configuration while keeping its divisibility: "
            "heldout equals check"
        )
    return DerivedSizes(check, heldout, ties, tuple(problems))


def _scaled_together(
    sizes: dict[str, int], production: dict[str, int], scaled: list[tuple[str, ...]]
) -> dict[str, int]:
    """Every traced group of sizes that must keep their production ratios (a broadcast across
    sizes of different values) at the smallest scale any of its sizes took; at production
    where that scale does not give every size a whole number."""
    sizes = dict(sizes)
    for group in scaled:
        members = [n for n in group if n in production]
        scale = min(Fraction(sizes[n], production[n]) for n in members)
        if any((production[n] * scale).denominator != 1 for n in members):
            scale = Fraction(1)
        sizes.update({n: int(production[n] * scale) for n in members})
    return sizes


def shrunk_sizes(
    production: dict[str, int], divisors: tuple[int, ...], floor: int
) -> dict[str, int]:
    """The sizes halved, round by round all together, while even and above `floor` and while
    every divisor of a size (a literal of the code: a group count) still divides it; a size
    equal to a divisor is pinned, and a halving that would stop a size dividing another (sizes
    halving in step keep dividing) is undone for that round. For comparisons at tiny sizes
    (porting): 8192 features in 512 groups stop at 512, not at 16."""
    sizes = dict(production)
    divisions = _divisions(production)
    pinned = _pinned(production, divisors)
    needed = {n: [d for d in divisors if d >= 2 and v % d == 0] for n, v in production.items()}

    def can_halve(name: str) -> bool:
        half, value = sizes[name] // 2, sizes[name]
        return (
            name not in pinned
            and value > floor
            and value % 2 == 0
            and not any(half % d for d in needed[name])
        )

    while halving := {n for n in sizes if can_halve(n)}:
        halved = {n: v // 2 if n in halving else v for n, v in sizes.items()}
        broken = {x for d, n in divisions if halved[n] % halved[d] for x in (d, n)}
        if broken & halving == halving:
            break
        kept = {n: v // 2 if n in halving - broken else v for n, v in sizes.items()}
        if _broken(kept, divisions):  # undoing some broke others: the last good round stands
            return sizes
        sizes = kept
    return sizes


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


def _heldout_moves(
    production: dict[str, int],
    check: dict[str, int],
    tied: set[str],
    groups: tuple[tuple[str, ...], ...] = (),
    shapes: tuple[tuple[str | int, ...], ...] = (),
) -> list[list[str]]:
    """Candidate moves off check, best first, each every size of one production value (equal
    sizes may meet in a contraction): first a value whose step leaves a non-multiple of check,
    then the largest, sizes written in a shape before those that are not (a rope theta of
    10000 passed as a static arg moves no shape); never a value one of whose sizes is tied to
    others (it follows them) or pinned. A small task (check at or above production) grows its
    smallest sizes instead."""
    blocked = {production[n] for n in tied}
    free = [n for n in production if production[n] not in blocked]
    non_multiple = [n for n in free if pow2_part(production[n]) < check[n] < production[n]]
    room = [n for n in free if check[n] < production[n] and n not in non_multiple]
    room.sort(key=lambda n: -production[n])
    growable = sorted((n for n in free if production[n] >= GROW_FROM), key=lambda n: production[n])
    order = non_multiple + room if non_multiple + room else growable
    shaped = {part for shape in shapes for part in shape if isinstance(part, str)}
    if shaped:
        order.sort(key=lambda n: n not in shaped)  # stable: the order above within each
    units: list[list[str]] = []
    for name in order:
        group = next((g for g in groups if name in g), None)
        unit = (
            [n for n in free if n in group]
            if group is not None
            else [n for n in free if production[n] == production[name]]
        )
        if unit not in units:
            units.append(unit)
    return units


def _parted(
    heldout: dict[str, int],
    production: dict[str, int],
    groups: tuple[tuple[str, ...], ...],
    tied: set[str],
    step: Callable[[str], int],
    ties: tuple[Tie, ...],
    shapes: tuple[tuple[str | int, ...], ...],
    divisions: list[tuple[str, str]],
) -> dict[str, int]:
    """The held-out sizes with every traced group of one production value at a value of its
    own where the budget allows (m = n = 4096 in production, the reference free of their
    equality: m and n differ). The group whose move costs most (grows the largest shape most)
    keeps its value, the next takes the nearest free value in its steps, and so on."""
    sizes = dict(heldout)
    by_value: dict[int, list[list[str]]] = {}
    for group in groups:
        free = [n for n in group if n in production and n not in tied]
        if free:
            by_value.setdefault(production[free[0]], []).append(free)

    def cost(unit: list[str]) -> int:
        grown = dict(sizes, **{name: sizes[name] + step(name) for name in unit})
        return _largest(shapes, grown)

    for units in by_value.values():
        taken: set[int] = set()
        for unit in sorted(units, key=cost, reverse=True):
            if sizes[unit[0]] in taken:
                moved = _moved_apart(sizes, unit, taken, step, ties, shapes)
                # a count dividing a size (groups, heads) keeps dividing where it did
                if moved is not None and _broken_count(moved, divisions) <= _broken_count(
                    sizes, divisions
                ):
                    sizes = moved
            taken.add(sizes[unit[0]])
    return sizes


def _moved_apart(
    sizes: dict[str, int],
    unit: list[str],
    taken: set[int],
    step: Callable[[str], int],
    ties: tuple[Tie, ...],
    shapes: tuple[tuple[str | int, ...], ...],
) -> dict[str, int] | None:
    """`sizes` with `unit` moved by the fewest of its steps to a value no other group holds,
    within the budget; None where no such move fits."""
    for shift in (1, -1, 2, -2, 3, -3):
        value = sizes[unit[0]] + shift * step(unit[0])
        if value <= 0 or value in taken:
            continue
        moved = dict(sizes, **{name: value for name in unit})
        _apply_ties(moved, ties)
        if _largest(shapes, moved) <= MAX_CHECK_ELEMENTS:
            return moved
    return None


def _pinned(production: dict[str, int], divisors: tuple[int, ...]) -> set[str]:
    """Sizes the reference writes as literals, from GROW_FROM up: smaller literals are mostly
    axes and factors (`transpose(0, 2, 1, 3)`, `x / 2`), not the size of the same value."""
    return {n for n, v in production.items() if v in divisors and v >= GROW_FROM}


def _divisions(production: dict[str, int]) -> list[tuple[str, str]]:
    """(d, n): size d divides size n in production and is small enough to be a count (groups,
    heads, a kernel size): keep it dividing n."""
    return [
        (d, n)
        for d, dv in production.items()
        for n, nv in production.items()
        if d != n and 2 <= dv <= KEEP_UP_TO and dv < nv and nv % dv == 0
    ]


def _broken_count(sizes: dict[str, int], divisions: list[tuple[str, str]]) -> int:
    return sum(1 for d, n in divisions if sizes[n] % sizes[d])


def _broken(sizes: dict[str, int], divisions: list[tuple[str, str]]) -> bool:
    return any(sizes[n] % sizes[d] for d, n in divisions)


def _doubled(
    production: dict[str, int],
    shapes: tuple[tuple[str | int, ...], ...],
    pinned: set[str],
    divisions: list[tuple[str, str]],
) -> dict[str, int]:
    """A small task's sizes doubled, except those pinned and those that would stop dividing a
    size kept as it is; production where a doubled shape would be too large."""
    growing = {n for n, v in production.items() if GROW_FROM <= v <= KEEP_UP_TO} - pinned
    while True:
        doubled = {n: 2 * v if n in growing else v for n, v in production.items()}
        stuck = {d for d, n in divisions if doubled[n] % doubled[d]}
        if not stuck & growing:
            break
        growing -= stuck
    if all(_elements(shape, doubled) <= MAX_DOUBLED_ELEMENTS for shape in shapes):
        return doubled
    return dict(production)


def _within_budget(
    check: dict[str, int],
    shapes: tuple[tuple[str | int, ...], ...],
    pinned: set[str],
    divisions: list[tuple[str, str]],
    production: dict[str, int],
) -> dict[str, int]:
    """Halve the leading size of the largest shape (with every size of its value) until each
    shape fits half of MAX_CHECK_ELEMENTS (the held-out run grows one); a size that is pinned,
    odd, would stop a division holding, or would lose its production's powers of two up to
    TILE_FLOOR (a kernel's 256 x 512 tiles divide every derived size) is left, and the next size
    of that shape is tried."""
    sizes = dict(check)

    def tiled(name: str) -> bool:
        unit = min(pow2_part(production[name]), TILE_FLOOR)
        return production[name] > KEEP_UP_TO and (sizes[name] // 2) % unit != 0

    while _largest(shapes, sizes) > MAX_CHECK_ELEMENTS // 2:  # room for the held-out run
        shape = max(shapes, key=lambda s: _elements(s, sizes))
        for part in shape:
            if not isinstance(part, str) or part in pinned or sizes[part] % 2 or tiled(part):
                continue
            value = sizes[part]
            halved = {n: v // 2 if v == value and n not in pinned else v for n, v in sizes.items()}
            if not _broken(halved, divisions):
                sizes = halved
                break
        else:
            return sizes  # nothing in it can shrink: validation says what it costs
    return sizes


def _largest(shapes: tuple[tuple[str | int, ...], ...], sizes: dict[str, int]) -> int:
    return max((_elements(shape, sizes) for shape in shapes), default=0)


def _elements(shape: tuple[str | int, ...], sizes: dict[str, int]) -> int:
    return math.prod(sizes.get(part, 1) if isinstance(part, str) else part for part in shape)
