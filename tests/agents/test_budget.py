"""Prices, accounting per call / session / search, and a cap that stops a call before it is sent."""

from __future__ import annotations

import pytest

from maxkernel_tui.agents.budget import (
    Budget,
    BudgetExceeded,
    BudgetMeter,
    Cap,
    Price,
    PriceTable,
)
from maxkernel_tui.agents.llm.client import LLMClient
from tests.fakes.scripted import Answer, Cut
from tests.support.llm import FakeSleep, Harness, ask


def test_price_lookup_and_overrides() -> None:
    table = PriceTable(
        {"gemini-2.5-flash": (0.5, 4.0), "my-model": {"input_per_mtok": 1, "output_per_mtok": 2}}
    )
    assert table.lookup("gemini-2.5-flash") == Price(0.5, 4.0)
    assert table.lookup("models/gemini-2.5-flash-lite") == Price(0.10, 0.40)  # longest prefix wins
    assert table.lookup("gemini-2.5-flash-preview-09-2025") == Price(0.5, 4.0)
    assert table.cost("my-model", 1_000_000, 1_000_000) == 3.0
    assert table.cost("llama-3-local", 10, 10) is None
    assert PriceTable({"*": (0, 0)}).cost("llama-3-local", 10, 10) == 0.0


def test_long_prompts_cost_the_long_context_rate() -> None:
    pro = PriceTable().lookup("gemini-2.5-pro")
    assert pro is not None
    assert pro.cost(100_000, 0) == pytest.approx(0.125)
    assert pro.cost(300_000, 1_000_000) == pytest.approx(0.75 + 15.0)


def test_reservations_hold_the_cap_for_parallel_calls() -> None:
    budget = Budget(cap=Cap(tokens=100))
    first = budget.reserve("m", 10, 40)
    budget.reserve("m", 10, 40)
    with pytest.raises(BudgetExceeded):
        budget.reserve("m", 10, 40)
    first.settle(5, 5, None)  # used 10 of the 50 it held
    budget.reserve("m", 10, 30)
    assert budget.spent.tokens == 10 and budget.spent.unpriced_calls == 1


async def test_the_call_that_would_pass_the_token_cap_is_never_sent(backend: Harness) -> None:
    backend.server.script.extend([Answer(["ok"], usage=(11, 7))] * 10)
    meters: list[BudgetMeter] = []
    budget = Budget(cap=Cap(tokens=130), on_meter=meters.append)
    client = backend.client(budget)
    request = ask(max_tokens=100)  # worst case: 9 prompt tokens (26 characters / 3) + 100
    done = 0
    with pytest.raises(BudgetExceeded) as caught:
        while True:
            await client.complete(request)
            done += 1
    assert done == 2 and len(backend.server.requests) == 2  # the third was refused, not sent
    assert budget.spent.tokens == 36 and budget.spent.calls == 2
    message = str(caught.value)
    assert "not sent" in message and "130-token cap" in message and "36 spent" in message
    assert [(m.scope, m.spent.tokens, m.cap.tokens) for m in meters] == [
        ("session", 18, 130),
        ("session", 36, 130),
    ]


async def test_the_call_that_would_pass_the_money_cap_is_never_sent(backend: Harness) -> None:
    backend.server.script.extend([Answer(["ok"], usage=(1000, 500))] * 3)
    provider_model = backend.provider.model
    budget = Budget(cap=Cap(usd=0.004), prices=PriceTable({provider_model: (0.30, 2.50)}))
    client = backend.client(budget)
    response = await client.complete(ask(max_tokens=1000))
    assert response.usage.cost_usd == pytest.approx(0.00155)
    with pytest.raises(
        BudgetExceeded, match=r"could cost \$0\.002503 .* only \$0\.00245 of the \$0\.004 cap"
    ):
        await client.complete(ask(max_tokens=1000))
    assert len(backend.server.requests) == 1
    assert budget.spent.usd == pytest.approx(0.00155)


async def test_a_money_cap_refuses_models_without_a_price(openai: Harness) -> None:
    openai.server.script.append(Answer(["ok"]))
    with pytest.raises(BudgetExceeded, match="no price in the price table"):
        await openai.client(Budget(cap=Cap(usd=1.0))).complete(ask())
    assert openai.server.requests == []


async def test_a_retry_that_would_pass_the_cap_is_not_sent(backend: Harness) -> None:
    backend.server.script.extend([Cut(Answer(["partial"]), after=1), Answer(["whole"])])
    budget = Budget(cap=Cap(tokens=120))
    with pytest.raises(BudgetExceeded):
        await backend.client(budget).complete(ask(max_tokens=100))
    assert len(backend.server.requests) == 1
    assert budget.spent.tokens > 0  # the broken attempt was charged, by estimate


async def test_search_scopes_are_charged_in_the_session_too(backend: Harness) -> None:
    backend.server.script.extend([Answer(["ok"], usage=(11, 7))] * 3)
    meters: list[BudgetMeter] = []
    session = Budget(on_meter=meters.append)
    search = session.child("search:beam-1", Cap(tokens=120))
    client = LLMClient(backend.provider, budget=session, sleep=FakeSleep())
    await client.complete(ask(max_tokens=100), budget=search)
    with pytest.raises(BudgetExceeded, match="search:beam-1"):
        await client.complete(ask(max_tokens=100), budget=search)
    await client.complete(ask(max_tokens=100))  # the session itself has no cap
    assert (search.spent.tokens, session.spent.tokens) == (18, 36)
    assert [m.scope for m in meters] == ["search:beam-1", "session", "session"]
    assert len(backend.server.requests) == 2


def test_charge_counts_usage_that_was_never_reserved_in_every_scope() -> None:
    """What a resumed session spent before: charged as it was, even past the cap (no model
    price needed), so that the next call is refused."""
    meters: list[BudgetMeter] = []
    session = Budget(cap=Cap(tokens=100, usd=1.0), on_meter=meters.append)
    search = session.child("search")
    search.charge(80, 40, 0.5, calls=3)
    assert session.spent.tokens == search.spent.tokens == 120
    assert session.spent.calls == 3 and session.spent.usd == 0.5
    assert [m.scope for m in meters] == ["search", "session"]
    with pytest.raises(BudgetExceeded):
        session.reserve("gemini-2.5-flash", 1, 1)
