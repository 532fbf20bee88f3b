"""Sizes as expressions over the task's input sizes, and scalar constants that follow them.

Every input size is a symbol; which sizes are one symbol is dataflow.py's decision, by where
they flow in the reference. The few sizes no dataflow rule reaches, and scalar constants (a
mean's divisor), are matched by their values in two traces of the reference (`bench` and a
probe at check shapes): the same in both is a constant, else a rational multiple, product or
ratio of symbols (e.g. the group count `features // 16`). The kernel file writes each size as an
expression over its inputs' shapes, so the same file works at shapes it has never seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations_with_replacement

from maxkernel_tui.agents.builtin.errors import CannotPlan


class ShapeRuleError(CannotPlan):
    """A size or constant whose dependence on the shapes cannot be written down."""


@dataclass(frozen=True)
class Dim:
    """factor * product(symbols) / product(over); a constant when it has no symbols."""

    factor: Fraction
    symbols: tuple[str, ...] = ()
    over: tuple[str, ...] = ()  # e.g. query heads per key head: q_heads / kv_heads

    @staticmethod
    def const(value: int) -> Dim:
        return Dim(Fraction(value))

    @property
    def is_const(self) -> bool:
        return not self.symbols and not self.over

    def __mul__(self, other: Dim) -> Dim:
        return _reduced(
            self.factor * other.factor, self.symbols + other.symbols, self.over + other.over
        )

    def divided_by(self, other: Dim) -> Dim | None:
        """self / other when that needs no new divisor symbols; None otherwise."""
        found = _reduced(
            self.factor / other.factor, self.symbols + other.over, self.over + other.symbols
        )
        return found if len(found.over) <= len(self.over) else None

    def is_one(self) -> bool:
        return self.is_const and self.factor == 1

    def render(self, names: dict[str, str]) -> str:
        """A Python integer expression, with each symbol replaced by its variable name."""
        if self.is_const:
            return str(int(self.factor))
        numerator, denominator = self.factor.numerator, self.factor.denominator
        terms = ([str(numerator)] if numerator != 1 or not self.symbols else []) + [
            names[s] for s in self.symbols
        ]
        text = " * ".join(terms)
        divisors = [names[s] for s in self.over] + ([str(denominator)] if denominator != 1 else [])
        return "".join([text, *(f" // {d}" for d in divisors)])


def _reduced(factor: Fraction, symbols: tuple[str, ...], over: tuple[str, ...]) -> Dim:
    """The Dim with common symbols of numerator and divisor cancelled."""
    numerator, divisor = list(symbols), []
    for symbol in over:
        if symbol in numerator:
            numerator.remove(symbol)
        else:
            divisor.append(symbol)
    return Dim(factor, tuple(sorted(numerator)), tuple(sorted(divisor)))


@dataclass(frozen=True)
class ShapeLiteral:
    """A scalar constant of the reference that depends on the shapes: dim, or 1 / dim."""

    dim: Dim
    reciprocal: bool = False

    def render(self, names: dict[str, str]) -> str:
        text = f"float({self.dim.render(names)})"
        return f"(1.0 / {text})" if self.reciprocal else text


class DimTable:
    """The symbols of one task: the input sizes, and sizes shifted from them."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[int, int]] = {}  # symbol -> (bench, check)
        self.origins: dict[str, tuple[int, int]] = {}  # symbol -> (input position, axis)
        self.shifts: dict[str, tuple[str, int]] = {}  # symbol -> (symbol, offset): e.g. height - 2
        # symbol -> the size it also subtracts (a valid conv's output whose taps vary: h - kh + 1)
        self.less: dict[str, str] = {}
        self.statics: dict[str, int] = {}  # symbol -> position of the static int arg it is

    def static_symbol(self, bench: int, check: int, position: int) -> None:
        """A static integer argument that differs between the traces (a group count) as a size
        of its own, read from the argument itself: sizes found by value (a group's width,
        channels // groups) can then follow it rather than an input size of the same values."""
        symbol = f"t{position}"  # after every input symbol: an input size of the same values wins
        self._values[symbol] = (bench, check)
        self.statics[symbol] = position

    def symbols(self) -> dict[str, tuple[int, int]]:
        return dict(self._values)

    def values(self, dim: Dim) -> tuple[Fraction, Fraction]:
        """`dim` at bench and at check shapes."""
        return tuple(  # type: ignore[return-value]
            dim.factor * self._value(dim.symbols, dim.over, trace) for trace in (0, 1)
        )

    def new_symbol(self, bench: int, check: int, position: int, axis: int) -> Dim:
        """A size of a program input, read from the input's shape in the kernel file: its own
        symbol even when another size has the same values (dataflow.py decides which sizes are
        one), and even when both traces agree (a batch of 2 in both configurations need not be 2
        at unseen shapes)."""
        symbol = f"s{len(self._values)}"
        self._values[symbol] = (bench, check)
        self.origins[symbol] = (position, axis)
        return Dim(Fraction(1), (symbol,))

    def shifted(self, dim: Dim, offset: int, less: Dim | None = None) -> Dim:
        """`dim - less + offset` as a symbol of its own (a valid convolution's output size,
        height - 2, or height - taps + 1 when the taps are a size too), so that products of
        such sizes stay expressible. Its rule comes from the primitive that makes it, never
        from matching values."""
        if less is not None and less.is_const:
            offset, less = offset - int(less.factor), None
        if offset == 0 and less is None:
            return dim
        base, minus = _one_symbol(dim, offset), _one_symbol(less, offset) if less else None
        symbol = f"{base}{'-' + minus if minus else ''}{offset:+d}"
        if symbol not in self._values:
            bench, check = self._values[base]
            if minus is not None:
                bench, check = bench - self._values[minus][0], check - self._values[minus][1]
                self.less[symbol] = minus
            self._values[symbol] = (bench + offset, check + offset)
            self.shifts[symbol] = (base, offset)
        return Dim(Fraction(1), (symbol,))

    def dim(self, bench: int, check: int) -> Dim:
        """Any other size: an input size, a multiple or product of input sizes, or a constant."""
        found = self._express(Fraction(bench), Fraction(check))
        if found is not None:
            return found
        if bench == check:
            return Dim.const(bench)
        raise ShapeRuleError(
            f"a size that is {bench} at bench shapes and {check} at check shapes "
            "is no multiple or product of the input sizes"
        )

    def literal(self, bench: float, check: float) -> float | ShapeLiteral:
        """A scalar constant: itself when both traces agree, else a size or its reciprocal."""
        if bench == check:
            return bench
        for reciprocal, (b, c) in (
            (False, (_exact(bench), _exact(check))),
            (True, (_inverse(bench), _inverse(check))),
        ):
            if b is not None and c is not None and _whole(b) and _whole(c):
                # an f32 constant holds a count exactly only below 2**24 (a volume's, at the
                # probe's scaled check sizes, is not): past that, to its rounding
                rounding = F32_ROUNDING if max(b, c) >= 2**24 else Fraction(0)
                found = self._express(b, c, rounding)
                if found is not None:
                    return ShapeLiteral(found, reciprocal)
        raise ShapeRuleError(
            f"a constant that is {bench!r} at bench shapes and {check!r} at check shapes "
            "is neither a size nor its reciprocal"
        )

    def _express(
        self, bench: Fraction, check: Fraction, rounding: Fraction = Fraction(0)
    ) -> Dim | None:
        """The simplest expression with these two values: fewest symbols, then a factor of 1,
        then no divisor symbol. Sizes equal in both traces only match an input size exactly
        (anything looser would be a coincidence). `rounding`: the relative error the values
        may carry (an f32 constant's)."""
        symbols = sorted(self._values)
        found = []
        for count in (1, 2, 3, 4):  # 4: a volume's count, channels * depth * height * width
            shapes: list[tuple[tuple[str, ...], tuple[str, ...]]] = [
                (combo, ()) for combo in combinations_with_replacement(symbols, count)
            ]
            if count == 2:
                shapes += [((a,), (b,)) for a in symbols for b in symbols if a != b]
            if count == 3:  # a group's element count: (channels / groups) * height * width
                shapes += [
                    (combo, (b,))
                    for combo in combinations_with_replacement(symbols, count)
                    for b in symbols
                    if b not in combo
                ]
            for numerator, over in shapes:
                bench_value, check_value = (
                    self._value(numerator, over, 0),
                    self._value(numerator, over, 1),
                )
                factor = bench / bench_value
                if abs(factor - check / check_value) > rounding * factor:
                    continue
                if rounding:  # the rounded value read as the exact size it stands for
                    whole = factor >= 1
                    factor = Fraction(round(factor)) if whole else Fraction(1, round(1 / factor))
                exact_only = bench == check or bench_value == check_value
                if factor != 1 and self._is_shifted_size(factor):
                    continue  # a factor of 126 where width - 2 is 126 in both traces is that size
                if factor == 1 or (_simple(factor) and not exact_only):
                    found.append((count, factor != 1, bool(over), Dim(factor, numerator, over)))
            if found:
                return min(found, key=lambda item: item[:3])[3]
            if bench == check:
                return None
        return None

    def _is_shifted_size(self, factor: Fraction) -> bool:
        return any(self._values[symbol] == (factor, factor) for symbol in self.shifts)

    def _value(self, numerator: tuple[str, ...], over: tuple[str, ...], trace: int) -> Fraction:
        value = Fraction(1)
        for symbol in numerator:
            value *= self._values[symbol][trace]
        for symbol in over:
            value /= self._values[symbol][trace]
        return value


# The relative rounding of an f32 value: half its last place.
F32_ROUNDING = Fraction(1, 2**24)


def _one_symbol(dim: Dim, offset: int) -> str:
    if len(dim.symbols) != 1 or dim.over or dim.factor != 1:
        raise ShapeRuleError(f"a size {offset:+d} of a size that is not one input size")
    return dim.symbols[0]


def _simple(factor: Fraction) -> bool:
    """Factors a person would write: n, 1/n."""
    return factor.numerator == 1 or factor.denominator == 1


def _whole(value: Fraction | None) -> bool:
    return value is not None and value.denominator == 1 and value > 0


def _exact(value: float) -> Fraction | None:
    try:
        return Fraction(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _inverse(value: float) -> Fraction | None:
    """1 / value when that is (within f32 rounding) a whole number; None otherwise."""
    if value == 0:
        return None
    inverse = 1 / value
    nearest = round(inverse)
    return Fraction(nearest) if abs(inverse - nearest) <= 1e-5 * abs(inverse) else None
