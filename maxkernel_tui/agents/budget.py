"""Tokens and money: a price table, accounting per call, per session and per search, a hard cap.

A `Budget` is one scope (the session; a search inside it is a `child`). Before a call is sent
the client `reserve`s its worst case in every scope up the chain: the prompt estimated
conservatively (characters / 3, where real tokenisers give about 4) plus the full
`max_tokens` of output. If that could pass any cap the call is refused with `BudgetExceeded` and
never sent. Reservations count against the cap until settled with the real usage, so calls
running in parallel cannot overrun it together. Every settlement reports a `BudgetMeter` to the
scope's `on_meter` callback (a child inherits its parent's). Usage that was never reserved
(what a resumed session spent before) is `charge`d directly.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from maxkernel_tui.config import Settings


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens; prompts longer than `long_context_tokens` cost the
    `long_*` rates where a model has them."""

    input_per_mtok: float
    output_per_mtok: float
    long_input_per_mtok: float | None = None
    long_output_per_mtok: float | None = None
    long_context_tokens: int = 200_000

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        long = prompt_tokens > self.long_context_tokens
        rate_in = (
            self.long_input_per_mtok if long and self.long_input_per_mtok else self.input_per_mtok
        )
        rate_out = (
            self.long_output_per_mtok
            if long and self.long_output_per_mtok
            else self.output_per_mtok
        )
        return (prompt_tokens * rate_in + completion_tokens * rate_out) / 1e6


# Standard paid tier, text input, USD per 1M tokens, from Google's price list
# (https://ai.google.dev/gemini-api/docs/pricing) as quoted by price trackers dated January to
# July 2026, collected on 2026-11-30. Prices move: check that page, and override here through
# `PriceTable(overrides)` (e.g. {"my-model": (0.5, 3.0)}, or {"*": (0, 0)} for a local server).
DEFAULT_PRICES: dict[str, Price] = {
    "gemini-3.5-flash": Price(1.50, 9.00),
    "gemini-3.1-pro": Price(2.00, 12.00, 4.00, 18.00),
    "gemini-3.1-flash-lite": Price(0.25, 1.50),
    "gemini-3-pro": Price(2.00, 12.00, 4.00, 18.00),
    "gemini-3-flash": Price(0.50, 3.00),
    "gemini-2.5-pro": Price(1.25, 10.00, 2.50, 15.00),
    "gemini-2.5-flash": Price(0.30, 2.50),
    "gemini-2.5-flash-lite": Price(0.10, 0.40),
    "gemini-2.0-flash": Price(0.10, 0.40),
    "builtin": Price(0.0, 0.0),  # the built-in offline agent: runs here, costs nothing
}


def _as_price(value: Price | Mapping[str, float] | Sequence[float]) -> Price:
    if isinstance(value, Price):
        return value
    if isinstance(value, Mapping):
        return Price(**value)  # type: ignore[arg-type]  # a TOML table of rates
    return Price(*value)  # type: ignore[arg-type]  # (input, output[, long_input, long_output])


class PriceTable:
    """Price lookup by model name: exact, else the longest known prefix (so dated or preview
    variants such as `gemini-2.5-flash-preview-09-2025` find their family), else `"*"`."""

    def __init__(
        self,
        overrides: Mapping[str, Price | Mapping[str, float] | Sequence[float]] | None = None,
        *,
        base: Mapping[str, Price] = DEFAULT_PRICES,
    ) -> None:
        self._prices = dict(base)
        self._prices.update({name: _as_price(p) for name, p in (overrides or {}).items()})

    def lookup(self, model: str) -> Price | None:
        model = model.rsplit("/", 1)[-1]  # "models/x", "publishers/google/models/x"
        if model in self._prices:
            return self._prices[model]
        prefixes = [name for name in self._prices if name != "*" and model.startswith(name)]
        if prefixes:
            return self._prices[max(prefixes, key=len)]
        return self._prices.get("*")

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        price = self.lookup(model)
        return None if price is None else price.cost(prompt_tokens, completion_tokens)


def _usd(amount: float) -> str:
    # Cents for real money, significant digits for the fractions of a cent one call costs.
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4g}"


def estimate_tokens(chars: int) -> int:
    """A deliberately high token count for `chars` characters of prompt."""
    return math.ceil(chars / 3)


@dataclass(frozen=True)
class Cap:
    tokens: int | None = None
    usd: float | None = None


@dataclass(frozen=True)
class Spent:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    unpriced_calls: int = 0  # calls to models without a price: their money is not in `usd`

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class BudgetMeter:
    """The event shown live: what a scope has spent against its cap."""

    scope: str
    spent: Spent
    cap: Cap


class BudgetExceeded(Exception):
    """A call was refused before it was sent, because it could pass a cap."""

    def __init__(self, message: str, scope: str) -> None:
        super().__init__(message)
        self.scope = scope


class Reservation:
    """A call's worst case, held in every scope of the chain until `settle` or `release`."""

    def __init__(self, chain: list[Budget], tokens: int, usd: float) -> None:
        self._chain, self._tokens, self._usd = chain, tokens, usd
        self._open = True

    def settle(self, prompt_tokens: int, completion_tokens: int, cost_usd: float | None) -> None:
        """Charge what the call really used, in every scope, and report the meters."""
        self._release()
        self._chain[0].charge(prompt_tokens, completion_tokens, cost_usd)

    def release(self) -> None:
        """Free the hold without charging (nothing was spent)."""
        self._release()

    def _release(self) -> None:
        with self._chain[0]._lock:
            if self._open:
                for scope in self._chain:
                    scope._reserved_tokens -= self._tokens
                    scope._reserved_usd -= self._usd
                self._open = False


class Budget:
    def __init__(
        self,
        scope: str = "session",
        cap: Cap | None = None,
        *,
        prices: PriceTable | None = None,
        parent: Budget | None = None,
        on_meter: Callable[[BudgetMeter], None] | None = None,
    ) -> None:
        self.scope = scope
        self.cap = cap or Cap()
        self.prices: PriceTable = prices or (parent.prices if parent else PriceTable())
        self.parent = parent
        self.on_meter: Callable[[BudgetMeter], None] | None = on_meter or (
            parent.on_meter if parent else None
        )
        self.spent = Spent()
        self._reserved_tokens = 0
        self._reserved_usd = 0.0
        self._lock: threading.RLock = parent._lock if parent else threading.RLock()

    def child(self, scope: str, cap: Cap | None = None) -> Budget:
        """A scope inside this one (a search): charged here and in every parent."""
        return Budget(scope, cap, parent=self)

    def _chain(self) -> list[Budget]:
        chain: list[Budget] = []
        scope: Budget | None = self
        while scope is not None:
            chain.append(scope)
            scope = scope.parent
        return chain

    def reserve(self, model: str, prompt_tokens: int, max_output_tokens: int) -> Reservation:
        """Hold the worst case of a call, or raise BudgetExceeded if it could pass a cap."""
        tokens = prompt_tokens + max_output_tokens
        usd = self.prices.cost(model, prompt_tokens, max_output_tokens)
        chain = self._chain()
        with self._lock:
            for scope in chain:
                scope._check(model, prompt_tokens, max_output_tokens, usd)
            for scope in chain:
                scope._reserved_tokens += tokens
                scope._reserved_usd += usd or 0.0
        return Reservation(chain, tokens, usd or 0.0)

    def _check(
        self, model: str, prompt_tokens: int, max_output_tokens: int, usd: float | None
    ) -> None:
        worst = (
            f"up to {prompt_tokens + max_output_tokens:,} tokens ({prompt_tokens:,} prompt, "
            f"estimated, + {max_output_tokens:,} output)"
        )
        if self.cap.tokens is not None:
            left = self.cap.tokens - self.spent.tokens - self._reserved_tokens
            if prompt_tokens + max_output_tokens > left:
                raise BudgetExceeded(
                    f"Budget of {self.scope}: the next call to {model} could use {worst}, but "
                    f"only {max(left, 0):,} of the {self.cap.tokens:,}-token cap are left "
                    f"({self.spent.tokens:,} spent). The call was not sent; raise the cap or "
                    f"lower max_tokens.",
                    self.scope,
                )
        if self.cap.usd is not None:
            if usd is None:
                raise BudgetExceeded(
                    f"Budget of {self.scope}: {model} has no price in the price table, so the "
                    f"{_usd(self.cap.usd)} cap cannot be enforced. The call was not sent; add the "
                    f'model\'s price (or "*" for a free local server) or cap tokens instead.',
                    self.scope,
                )
            usd_left = self.cap.usd - self.spent.usd - self._reserved_usd
            if usd > usd_left:
                raise BudgetExceeded(
                    f"Budget of {self.scope}: the next call to {model} could cost {_usd(usd)} "
                    f"({worst}), but only {_usd(max(usd_left, 0))} of the {_usd(self.cap.usd)} "
                    f"cap is left ({_usd(self.spent.usd)} spent). The call was not sent.",
                    self.scope,
                )

    def charge(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        cost_usd: float | None,
        *,
        calls: int = 1,
    ) -> None:
        """Charge usage that needs no reservation (a settled call, or what a resumed session
        spent before) in this scope and every parent, and report the meters."""
        for scope in self._chain():
            scope._add(prompt_tokens, completion_tokens, cost_usd, calls)

    def _add(
        self, prompt_tokens: int, completion_tokens: int, cost_usd: float | None, calls: int
    ) -> None:
        with self._lock:
            s = self.spent
            self.spent = replace(
                s,
                calls=s.calls + calls,
                prompt_tokens=s.prompt_tokens + prompt_tokens,
                completion_tokens=s.completion_tokens + completion_tokens,
                usd=s.usd + (cost_usd or 0.0),
                unpriced_calls=s.unpriced_calls + (calls if cost_usd is None else 0),
            )
            meter = BudgetMeter(self.scope, self.spent, self.cap)
        if self.on_meter is not None:
            self.on_meter(meter)


def session_budget(
    settings: Settings, on_meter: Callable[[BudgetMeter], None] | None = None
) -> Budget:
    """The session's budget from the settings: its caps, and the price table with the user's
    `[prices."model"]` entries (input/output dollars per million tokens) over the built-in one."""
    overrides = {
        model: Price(entry["input"], entry["output"]) for model, entry in settings.prices.items()
    }
    return Budget(
        "session",
        Cap(tokens=settings.budget_tokens, usd=settings.budget_dollars),
        prices=PriceTable(overrides),
        on_meter=on_meter,
    )
