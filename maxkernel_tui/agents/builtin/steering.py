"""How the built-in agent answers the engineer: it reads the reasons of the proposals turned down
at a step and the engineer's messages for what they ask (the epilogue fused into the matmul's
`pallas_call` or given one of its own, smaller or larger blocks), and offers the first kernel on
its list that was not turned down, preferring one that does what they ask; or says plainly that
it has nothing else. No jax here: it works on the kernels' text."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from maxkernel_tui.agents.roles.context import StepContext, engineer_words
from maxkernel_tui.agents.roles.tunables import find_tunables


class Wish(StrEnum):
    """What the engineer's words ask of the next kernel, among what the agent can change."""

    FUSE = "the epilogue fused into the matmul's pallas_call"
    SPLIT = "the epilogue in a pallas_call of its own"
    SMALLER = "smaller blocks"
    LARGER = "larger blocks"


_ASKS = {
    Wish.FUSE: re.compile(
        r"\bfus(?:e|ed|es|ing|ion)\b|\binto the (?:matmul|epilogue)\b|"
        r"\b(?:one|single) (?:pallas_call|kernel|stage)\b",
        re.IGNORECASE,
    ),
    Wish.SPLIT: re.compile(
        r"\bunfus|\bsplit (?:the|it|out) (?:epilogue|row|reduction)|"
        r"\b(?:separate|own) (?:kernel|stage|pallas_call)|\btwo (?:pallas_calls|kernels|stages)\b",
        re.IGNORECASE,
    ),
    Wish.SMALLER: re.compile(r"\bsmaller\b|\bshrink|\bless vmem\b|\bhalve", re.IGNORECASE),
    Wish.LARGER: re.compile(r"\blarger\b|\bbigger\b|\bgrow\b|\bfewer (?:grid )?steps\b", re.I),
}
_OPPOSITE = {
    Wish.FUSE: Wish.SPLIT,
    Wish.SPLIT: Wish.FUSE,
    Wish.SMALLER: Wish.LARGER,
    Wish.LARGER: Wish.SMALLER,
}


@dataclass(frozen=True)
class Offer:
    """A kernel the agent can propose: its file, what it is (planner.Plan.family), how made."""

    source: str
    family: str
    how: str

    @property
    def stages(self) -> int:
        """Its `pallas_call`s: a plan of several stages is named "multi-stage (a+b+...)"."""
        if not self.family.startswith("multi-stage ("):
            return 1
        return self.family.count("+") + 1

    @property
    def block_elements(self) -> int:
        """The product of its declared block sizes (its blocks' size, up to the file's
        shrinking to the actual sizes)."""
        product = 1
        for value in find_tunables(self.source).values():
            product *= value
        return product


@dataclass(frozen=True)
class Choice:
    offer: Offer | None  # None: every kernel on offer was turned down
    notes: tuple[str, ...]  # what became of each wish, in words


def normalised(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def steering_words(step: StepContext) -> list[str]:
    """The engineer's words that bear on this step: the reasons its proposals were turned down
    and the rejections and messages in its feedback, oldest first, each once."""
    words = [*engineer_words(step.feedback), *(t.reason for t in step.turned_down)]
    return list(dict.fromkeys(w.strip() for w in words if w.strip()))


def wishes(words: Sequence[str]) -> list[Wish]:
    """What `words` ask, the latest words first; a wish an earlier word contradicts is dropped."""
    found: list[Wish] = []
    for text in reversed(words):
        for wish, pattern in _ASKS.items():
            if pattern.search(text) and wish not in found and _OPPOSITE[wish] not in found:
                found.append(wish)
    return found


def choose(
    offers: Sequence[Offer], turned_down: Iterable[str], wished: Sequence[Wish], against: Offer
) -> Choice:
    """The first offer not turned down that grants the most of `wished` and goes against the
    fewest (compared with `against`, the kernel turned down last or the current one)."""
    down = {normalised(source) for source in turned_down}
    fresh = [offer for offer in offers if normalised(offer.source) not in down]
    if not fresh:
        return Choice(None, ())
    chosen = max(fresh, key=lambda offer: _score(offer, wished, against))
    notes = tuple(
        f"{wish}: " + ("done" if _grants(chosen, wish, against) else _why_not(wish, against))
        for wish in wished
    )
    return Choice(chosen, notes)


def _score(offer: Offer, wished: Sequence[Wish], against: Offer) -> int:
    """Wishes granted, less those it goes against (two pallas_calls when one was asked)."""
    return sum(
        _grants(offer, wish, against) - _grants(offer, _OPPOSITE[wish], against) for wish in wished
    )


def _grants(offer: Offer, wish: Wish, against: Offer) -> bool:
    match wish:
        case Wish.FUSE:
            return offer.stages < against.stages
        case Wish.SPLIT:
            return offer.stages > against.stages
        case Wish.SMALLER:
            return offer.block_elements < against.block_elements
        case Wish.LARGER:
            return offer.block_elements > against.block_elements


def _why_not(wish: Wish, against: Offer) -> str:
    match wish:
        case Wish.FUSE if against.stages == 1:
            return (
                "not possible here: the kernel compared with already runs as one pallas_call, "
                "its epilogue fused into the matmul's"
            )
        case Wish.FUSE:
            return (
                "not possible here: no kernel the agent can still offer runs in fewer "
                "pallas_calls (its planner found no way to hold these pieces in one tiling)"
            )
        case Wish.SPLIT:
            return "not possible here: no kernel the agent can still offer has more pallas_calls"
        case _:
            return f"not possible here: no kernel the agent can still offer has {wish}"


def heard(words: Sequence[str], wished: Sequence[Wish], notes: Sequence[str]) -> str:
    """What the agent understood of the engineer's words and did with them, in a sentence or
    two (empty without words)."""
    if not words:
        return ""
    quoted = "; ".join(f"“{w[:160]}”" for w in words[-3:])
    if not wished:
        return (
            f"Read: {quoted}. The built-in agent acts on requests for a fused or a separate "
            "epilogue and for smaller or larger blocks; it found none here, so it offers its "
            "next kernel instead."
        )
    return f"Read: {quoted}. Asked for: " + "; ".join(notes) + "."
