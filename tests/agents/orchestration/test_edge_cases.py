"""The tester's step: proposed edge cases are validated, join the evaluations from then on (a
kernel failing one goes to the debugger), and a resumed session reuses them without asking again."""

from __future__ import annotations

import json

import pytest

from maxkernel_tui.agents.orchestration.events import (
    EdgeCasesChosen,
    EvaluationDone,
    Note,
    decode,
)
from maxkernel_tui.agents.roles.parsers import edge_proposals, parse_edge_cases
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import DIAGNOSIS, GOOD, KERNELS, kernel, plan

CHUNKED = (
    KERNELS / "rmsnorm_fixed_chunk.py"
).read_text()  # 256-wide chunks: right on the task's own shapes
EDGE = {
    "name": "edge_hidden",
    "params": {"batch": 2, "seq": 64, "hidden": 384},
    "why": "3 lane tiles",
}
RAGGED = {
    "name": "edge_ragged",
    "params": {"batch": 2, "seq": 41, "hidden": 512},
    "why": "odd rows",
}
TESTER = json.dumps({"configs": [EDGE, RAGGED]})


def events(store, session_id: str, cls: type) -> list:
    decoded = [decode(e.kind, e.payload) for e in store.events(session_id)]
    return [e for e in decoded if isinstance(e, cls)]


@pytest.mark.slow  # the real harness validates and evaluates the edge cases
@pytest.mark.heavy
@pytest.mark.asyncio
async def test_an_edge_case_fails_the_first_kernel_and_is_kept_on_resume(open_on, store) -> None:
    provider = RoleProvider(
        {
            "planner": [plan()],
            "implementer": [kernel(CHUNKED)],
            "tester": [TESTER],
            "debugger": [kernel(GOOD)],
            "profiler": [DIAGNOSIS],
        }
    )
    opened = await open_on(provider)
    await opened.engine.run()

    (chosen,) = events(store, opened.session_id, EdgeCasesChosen)
    assert chosen.accepted == [["edge_hidden", EDGE["params"]]]
    assert (
        "edge_ragged: array 0 [2, 41, 512]: second-last dim 41 is not a multiple of 8"
        in chosen.rejected[0]
    )
    note = next(n for n in events(store, opened.session_id, Note) if n.ref == "i1/tester/note")
    assert "edge case edge_hidden" in note.text and "rejected edge_ragged" in note.text
    judged = {e.step: e for e in events(store, opened.session_id, EvaluationDone)}
    assert judged["i1/implement"].verdict == "accepted"  # the task's own shapes hide the bug
    assert judged["i1/tester"].verdict == "rejected" and judged["i1/tester"].failure.startswith(
        "edge: edge_hidden"
    )
    assert "edge: edge_hidden" in provider.prompts("debugger")[0]
    fixed = {c.name: c for c in judged["i1/debug1"].report.checks}
    assert judged["i1/debug1"].verdict == "accepted" and fixed["edge"].status == "pass"
    assert "Check configuration (CONFIGS['check'])" in provider.prompts("tester")[0]

    again = RoleProvider({})
    resumed = await open_on(again, resume=opened.session_id)
    await resumed.engine.run()
    assert again.requests == []  # nothing asked again, the tester included
    assert resumed.engine.tools.options.extra_configs == (("edge_hidden", EDGE["params"]),)


@pytest.mark.parametrize(
    "text, message",
    [
        ("no json here", "answer with one JSON object"),
        ('{"cases": []}', "a `configs` list of at most 3"),
        (json.dumps({"configs": [EDGE] * 4}), "at most 3"),
        (json.dumps({"configs": [{**EDGE, "name": "rows"}]}), "must start with `edge_`"),
        (json.dumps({"configs": [{**EDGE, "name": "edge_../x"}]}), "must start with `edge_`"),
        (json.dumps({"configs": [{**EDGE, "params": {"seq": -1}}]}), "to a positive int"),
        (json.dumps({"configs": [{**EDGE, "params": {"seq": 4.5}}]}), "to a positive int"),
        (json.dumps({"configs": [{**EDGE, "why": ""}]}), "why must say"),
        (
            json.dumps({"configs": [{"name": "edge_a", "params": {"n": 1}}]}),
            "exactly `name`, `params` and `why`",
        ),
        (json.dumps({"configs": [EDGE, EDGE]}), "a name of its own"),
    ],
)
def test_the_tester_parser_says_what_to_fix(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("`", "`")):
        parse_edge_cases(text)


def test_the_tester_parser_takes_a_fenced_block() -> None:
    parsed = parse_edge_cases(f"Two edge cases:\n```json\n{TESTER}\n```\n")
    assert edge_proposals(parsed) == [
        ("edge_hidden", EDGE["params"]),
        ("edge_ragged", RAGGED["params"]),
    ]
    assert edge_proposals(parse_edge_cases('{"configs": []}')) == []
