"""The tool loop inside a step, through the real google-genai and HTTP clients against fake
Gemini and OpenAI-compatible servers (the harness and jax_api are fakes here: milliseconds; the
slow tests in tests/agents/tools run the real ones)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from maxkernel_tui.agents.budget import Budget, Cap
from maxkernel_tui.agents.knowledge import topic
from maxkernel_tui.agents.orchestration.events import (
    EvaluationDone,
    LlmAnswer,
    ToolAnswered,
    ToolsCalled,
)
from maxkernel_tui.agents.tools.assignment import RoleAssignment, RolePlan
from maxkernel_tui.agents.tools.specs import ToolName
from tests.fakes.role_gemini import Scripted
from tests.fakes.role_provider import NO_EDGE_CASES
from tests.fakes.scripted import Answer
from tests.support.engine import DIAGNOSIS, GOOD, Bench, FakeJaxApi, FakeTools, events, kernel, plan
from tests.support.llm import Served, serve

pytestmark = pytest.mark.asyncio


@pytest.fixture(params=["gemini", "openai"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def session_answers(implementer: list[Scripted]) -> dict[str, list[Scripted]]:
    return {
        "planner": [plan()],
        "implementer": implementer,
        "profiler": [DIAGNOSIS],
        "tester": [NO_EDGE_CASES],
    }


def calls(*pairs: tuple[str, dict[str, Any] | str], text: str = "Let me look.") -> Answer:
    return Answer([text], tool_calls=list(pairs))


def results_of(bench: Bench, session: str) -> list[ToolAnswered]:
    return [e for e in events(bench.store, session, ToolAnswered) if isinstance(e, ToolAnswered)]


def declared(body: dict[str, Any]) -> list[str]:
    """The tool names a request declared, in either API's shape."""
    if "tools" not in body:
        return []
    gemini = [d["name"] for t in body["tools"] for d in t.get("functionDeclarations", [])]
    return gemini or [t["function"]["name"] for t in body["tools"]]


def tool_results(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(tool name or call id, result text) of every tool result the request carries."""
    if "contents" in body:
        return [
            (p["functionResponse"]["name"], p["functionResponse"]["response"]["result"])
            for c in body["contents"]
            for p in c.get("parts", [])
            if "functionResponse" in p
        ]
    return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]


async def run_session(
    bench: Bench, kind: str, implementer: list[Scripted], **engine: Any
) -> tuple[Served, Any, str]:
    server, provider = await serve(kind, session_answers(implementer))
    try:
        built = bench.engine(provider, **engine)
        outcome = await built.run()
    finally:
        await provider.aclose()
        await server.stop()
    return server, outcome, built.session_id


async def test_the_implementer_looks_up_the_api_lowers_its_draft_and_proposes_it(
    bench: Bench, kind: str
) -> None:
    api = FakeJaxApi()
    first = calls(("jax_api", {"name": "pl.BlockSpec"}), ("lower", {"source": GOOD}))
    server, outcome, session = await run_session(bench, kind, [first, kernel(GOOD)], jax_api=api)
    assert outcome.best is not None and outcome.best.source == GOOD
    assert api.looked_up == ["pl.BlockSpec"]
    assert bench.tools.probed == [(GOOD, "bench", "tpu_compile")]
    implementer = server.bodies_of("implementer")
    assert len(implementer) == 2
    assert declared(implementer[0]) == ["jax_api", "knowledge", "lower", "check"]
    assert declared(server.bodies_of("planner")[0]) == ["knowledge", "jax_api", "profile_summary"]
    results = [text for _, text in tool_results(implementer[1])]
    assert "pl.BlockSpec (class) in jax (fake)" in results[0]
    assert results[1].startswith("passed: compiled at bench for TPU v5e")  # the conclusion first
    store = bench.store
    (turn,) = events(store, session, ToolsCalled)
    assert isinstance(turn, ToolsCalled) and [c["name"] for c in turn.calls] == ["jax_api", "lower"]
    assert [(a.name, a.ok) for a in results_of(bench, session)] == [
        ("jax_api", True),
        ("lower", True),
    ]
    (evaluated,) = events(store, session, EvaluationDone)
    assert isinstance(evaluated, EvaluationDone) and evaluated.verdict == "accepted"


async def test_a_failing_tool_and_malformed_calls_reach_the_model_as_results(
    bench: Bench, kind: str
) -> None:
    bad_calls: list[tuple[str, dict[str, Any] | str]] = [
        ("jax_api", {"name": "pl.NoSuchThing"}),  # the tool fails
        ("compile_it", {"source": GOOD}),  # no such tool
        ("lower", {"source": 3}),  # arguments against the declaration
        ("check", {"source": GOOD, "config": "heldout"}),  # shapes never shown to agents
    ]
    if kind == "openai":
        bad_calls.append(("check", '{"source": "def'))  # arguments that are not JSON
    server, outcome, session = await run_session(
        bench, kind, [calls(*bad_calls), kernel(GOOD)], jax_api=FakeJaxApi()
    )
    assert outcome.best is not None and outcome.best.source == GOOD  # the session went on
    answered = results_of(bench, session)
    assert not any(a.ok for a in answered)
    texts = [a.text for a in answered]
    expected = [
        "has no 'pl.NoSuchThing'",
        "no tool named 'compile_it'",
        "$.source: expected string, got integer",
        "no configuration 'heldout'",
        "not valid JSON",
    ]
    assert len(texts) == len(bad_calls)
    for text, fragment in zip(texts, expected):
        assert text.startswith("error:") and fragment in text, text
    seen = [text for _, text in tool_results(server.bodies_of("implementer")[1])]
    assert seen == texts  # the model read every error as its call's result
    assert bench.tools.probed == []  # nothing malformed or hidden reached the harness


def looping(n: int, usage: tuple[int, int] = (11, 7)) -> list[Scripted]:
    return [
        Answer([], tool_calls=[("jax_api", {"name": "pl.BlockSpec"})], usage=usage)
        for _ in range(n)
    ]


async def test_the_per_step_limit_stops_a_model_that_loops_on_tools(
    bench: Bench, kind: str
) -> None:
    api = FakeJaxApi()
    roles = RolePlan({"implementer": RoleAssignment(None, (ToolName.JAX_API,), 2)})
    server, outcome, session = await run_session(bench, kind, looping(20), jax_api=api, roles=roles)
    assert outcome.best is None
    assert outcome.reason.startswith("model error") and "limit of 2" in outcome.reason
    assert api.looked_up == ["pl.BlockSpec"] * 2  # the limit held
    # two calls answered, one round refused, then the model called again and was stopped
    assert len(server.bodies_of("implementer")) == 4
    refused = [a for a in results_of(bench, session) if not a.ok]
    assert len(refused) == 1 and "limit of 2 tool calls" in refused[0].text
    assert bench.store.session(session).status == "failed"


async def test_the_budget_stops_a_model_that_loops_on_tools(bench: Bench, kind: str) -> None:
    api = FakeJaxApi()
    budget = Budget(cap=Cap(tokens=60_000))
    server, outcome, session = await run_session(
        bench, kind, looping(40, usage=(6_000, 50)), jax_api=api, budget=budget
    )
    assert outcome.reason.startswith("budget:"), outcome.reason
    assert bench.store.session(session).status == "stopped"
    asked = len(server.bodies_of("implementer"))
    assert 2 <= asked < 10 and len(api.looked_up) == asked  # stopped long before the step limit
    assert budget.spent.tokens <= 60_000


class HoldingJaxApi(FakeJaxApi):
    """Holds the lookup of `held` until cancelled; `reached` says it is holding."""

    def __init__(self, held: str) -> None:
        super().__init__()
        self.held, self.reached = held, asyncio.Event()

    async def lookup(self, name: str) -> str:
        if name == self.held:
            self.reached.set()
            await asyncio.Event().wait()
        return await super().lookup(name)


async def test_resume_replays_stored_turns_and_results_without_calling_again(
    bench: Bench, kind: str
) -> None:
    first_turn = calls(("jax_api", {"name": "pl.BlockSpec"}), ("lower", {"source": GOOD}))
    second_turn = calls(("jax_api", {"name": "pl.pallas_call"}))
    server, provider = await serve(kind, session_answers([first_turn, second_turn]))
    held = HoldingJaxApi("pl.pallas_call")
    engine = bench.engine(provider, jax_api=held)
    running = asyncio.create_task(engine.run())
    await asyncio.wait_for(held.reached.wait(), 20)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await provider.aclose()
    await server.stop()
    session = engine.session_id
    assert bench.store.session(session).status == "stopped"

    again, provider = await serve(kind, session_answers([kernel(GOOD)]))
    api, tools = FakeJaxApi(), FakeTools()
    try:
        outcome = await bench.engine(provider, session_id=session, jax_api=api, tools=tools).run()
    finally:
        await provider.aclose()
        await again.stop()
    assert outcome.best is not None and outcome.best.source == GOOD
    assert api.looked_up == ["pl.pallas_call"]  # only the call whose result was not stored
    assert tools.probed == []  # the stored lower result was replayed
    assert again.roles.count("planner") == 0 and again.roles.count("implementer") == 1
    (last,) = again.bodies_of("implementer")
    names = [name for name, _ in tool_results(last)]
    assert len(names) == 3  # every result, replayed ones included, reached the model
    refs = [e.payload["ref"] for e in bench.store.events(session)]
    assert len(refs) == len(set(refs))


async def test_each_role_asks_its_own_model_and_each_model_is_billed_at_its_price(
    bench: Bench,
) -> None:
    roles = RolePlan({"implementer": RoleAssignment("gemini-2.5-pro", (ToolName.JAX_API,), 8)})
    server, provider = await serve("gemini", session_answers([kernel(GOOD)]))
    budget = Budget()
    try:
        engine = bench.engine(provider, roles=roles, jax_api=FakeJaxApi(), budget=budget)
        await engine.run()
    finally:
        await provider.aclose()
        await server.stop()
    paths = {r.path.rsplit("/", 1)[1].split(":")[0] for r in server.requests}
    assert paths == {"gemini-2.5-pro", "gemini-2.5-flash"}
    by_role = dict(zip(server.roles, (r.path for r in server.requests)))
    assert "gemini-2.5-pro" in by_role["implementer"] and "gemini-2.5-flash" in by_role["planner"]
    calls_made = bench.store.llm_calls(engine.session_id)
    billed: dict[str, float] = {}
    for call in calls_made:
        billed[call.model] = billed.get(call.model, 0.0) + call.cost
        price = budget.prices.cost(call.model, call.prompt_tokens, call.completion_tokens)
        assert call.cost == pytest.approx(price)
    assert set(billed) == {"gemini-2.5-pro", "gemini-2.5-flash"}
    pro = [c for c in calls_made if c.model == "gemini-2.5-pro"]
    # the same tokens cost more on the stronger model: the two were not priced alike
    flash_rate = budget.prices.cost("gemini-2.5-flash", 1_000_000, 0)
    pro_rate = budget.prices.cost("gemini-2.5-pro", 1_000_000, 0)
    assert pro and pro_rate is not None and flash_rate is not None and pro_rate > flash_rate


async def test_many_calls_in_one_turn_cannot_pass_the_limit(bench: Bench, kind: str) -> None:
    """The limit counts calls, not turns: a turn of five calls with a limit of two runs two."""
    api = FakeJaxApi()
    roles = RolePlan({"implementer": RoleAssignment(None, (ToolName.JAX_API,), 2)})
    burst = calls(*[("jax_api", {"name": "pl.BlockSpec"}) for _ in range(5)])
    _, outcome, session = await run_session(
        bench, kind, [burst, kernel(GOOD)], jax_api=api, roles=roles
    )
    assert api.looked_up == ["pl.BlockSpec"] * 2
    assert [a.ok for a in results_of(bench, session)] == [True, True, False, False, False]
    assert outcome.best is not None  # answering after the refusals is fine


async def test_a_step_s_answer_carries_the_price_of_its_tool_turns(bench: Bench) -> None:
    """What a search node or the Agents pane says a step cost includes the turns that called
    tools, not only the last answer."""
    first = Answer([], tool_calls=[("jax_api", {"name": "pl.BlockSpec"})], usage=(1000, 100))
    _, _, session = await run_session(bench, "gemini", [first, kernel(GOOD)], jax_api=FakeJaxApi())
    (turn,) = [e for e in events(bench.store, session, ToolsCalled) if isinstance(e, ToolsCalled)]
    answers = [e for e in events(bench.store, session, LlmAnswer) if isinstance(e, LlmAnswer)]
    (implemented,) = [a for a in answers if a.role == "implementer"]
    assert turn.tokens == 1100
    completion = len(kernel(GOOD)) // 4
    assert implemented.tokens == 1100 + 900 + completion  # both turns, as the server billed
    prices = Budget().prices
    first_cost, last_cost = (
        prices.cost("gemini-2.5-flash", 1000, 100),
        prices.cost("gemini-2.5-flash", 900, completion),
    )
    assert first_cost is not None and last_cost is not None
    assert implemented.cost_usd == pytest.approx(first_cost + last_cost)


async def test_knowledge_and_profile_summary_answer_from_the_pack_and_the_profile(
    bench: Bench,
) -> None:
    answers = session_answers([calls(("knowledge", {"topic": "blockspec"})), kernel(GOOD)])
    answers["profiler"] = [calls(("profile_summary", {})), DIAGNOSIS]
    server, provider = await serve("gemini", answers)
    try:
        engine = bench.engine(provider, jax_api=FakeJaxApi())
        await engine.run()
    finally:
        await provider.aclose()
        await server.stop()
    knowledge, profile = results_of(bench, engine.session_id)
    assert knowledge.ok and knowledge.text == topic("blockspec")
    assert profile.ok and profile.text == engine.last_profile[1]  # the profiled kernel's summary
    assert "estimated" in profile.text
