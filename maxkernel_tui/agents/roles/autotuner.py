"""The autotuner's search space: one tunable at a time, halved and doubled.

Block sizes on a TPU live on powers of two times the (8, 128) tile, so halving and doubling
keeps a candidate legal when the start is; values stay multiples of 8 between 8 and 8192.
The engine scores each candidate with the performance model (cheap, no TPU) and spends its few
harness evaluations on the best ones.
"""

from __future__ import annotations

LOWEST, HIGHEST = 8, 8192


def neighbours(tunables: dict[str, int]) -> list[dict[str, int]]:
    """Every setting one step away from `tunables`, in a fixed order (so a replay agrees)."""
    found: list[dict[str, int]] = []
    for name in sorted(tunables):
        value = tunables[name]
        for candidate in (value * 2, value // 2):
            if LOWEST <= candidate <= HIGHEST and candidate % 8 == 0 and candidate != value:
                found.append(dict(tunables, **{name: candidate}))
    return found


def describe_change(old: dict[str, int], new: dict[str, int]) -> str:
    return ", ".join(
        f"{name} {old[name]} → {new[name]}" for name in sorted(new) if new[name] != old.get(name)
    )
