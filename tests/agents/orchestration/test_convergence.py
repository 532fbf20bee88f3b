"""A session converges (fake tools, no jax): a kernel is judged once, whoever proposes it and
however its comments and layout differ; a kernel turned down (by the harness or the engineer) is
not proposed again: the role is asked for another, and the log says when it has nothing new;
one version numbering in the log."""

from __future__ import annotations

import json
import shutil

import pytest

from maxkernel_tui.agents.orchestration.describe import describe
from maxkernel_tui.agents.orchestration.ending import best_at_end
from maxkernel_tui.agents.orchestration.events import (
    EarlierVerdict,
    EvaluationDone,
    ProposalRepeated,
    SessionEnded,
    VersionCreated,
)
from maxkernel_tui.agents.orchestration.gates import APPROVE, REJECT, Decision, ScriptedGate
from maxkernel_tui.agents.orchestration.verdicts import VerdictBook
from maxkernel_tui.agents.roles.tunables import set_tunables
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.checks import EvalReport
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import (
    BAD,
    CHUNKED,
    DIAGNOSIS,
    GOOD,
    Bench,
    FakeTools,
    accepted,
    events,
    kernel,
    plan,
    rejected,
    rmsnorm_task,
)

# BAD again, as a model would write it: other comments, other indentation, blank lines
BAD_RESTYLED = "# the same kernel, restyled\n\n" + BAD.replace("    ", "  ") + "\n\n# end\n"


def test_the_verdict_key_ignores_layout_and_names_task_configurations_and_target() -> None:
    task = rmsnorm_task()
    book = VerdictBook(task, "v5e", [])
    assert book.key(BAD) == book.key(BAD_RESTYLED)
    assert book.key(BAD) != book.key(GOOD)
    assert book.key(BAD) != VerdictBook(task, "v6e", []).key(BAD)
    before = book.key(BAD)
    book.set_extra_configs([("edge_hidden", {"hidden": 384})])
    assert book.key(BAD) != before  # an edge case joins every later verdict
    other = task.with_extra_configs(("edge_rows",))
    assert VerdictBook(other, "v5e", []).key(BAD) != before


def test_another_task_snapshot_is_another_verdict(tmp_path) -> None:
    copy = tmp_path / "12p"
    shutil.copytree(rmsnorm_task().folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
    key = VerdictBook(load_task(copy), "v5e", []).key(GOOD)
    reference = copy / "reference.py"
    reference.write_text(reference.read_text() + "\n# edited\n")
    assert VerdictBook(load_task(copy), "v5e", []).key(GOOD) != key  # the task changed


@pytest.mark.asyncio
async def test_a_debugger_that_repeats_a_rejected_kernel_is_asked_for_another(
    bench: Bench,
) -> None:
    # implementer: BAD (rejected); the debugger first offers BAD again, restyled, then GOOD
    provider = RoleProvider(
        {
            "planner": [plan()],
            "implementer": [kernel(BAD)],
            "debugger": [kernel(BAD_RESTYLED), kernel(GOOD)],
            "profiler": [DIAGNOSIS],
        }
    )
    gate = ScriptedGate()
    engine = bench.engine(provider, gate=gate, mode="hitl")
    outcome = await engine.run()

    store, session = bench.store, engine.session_id
    assert bench.tools.evaluated == [BAD, GOOD]  # the repeat never reached the harness
    assert [p.content for p in gate.seen if p.subject == "kernel"] == [BAD, GOOD]  # nor the gate
    (repeat,) = events(store, session, ProposalRepeated)
    assert repeat.step == "i1/debug1" and "v1, rejected: tpu_lower" in repeat.rejection
    asked = [
        r.context or {} for r in provider.requests if (r.context or {}).get("role") == "debugger"
    ]
    second = asked[1]
    assert second["kernel"] == BAD_RESTYLED and "repeat" in second["failure"]["check"]
    assert "already turned down" in provider.prompts("debugger")[1]
    assert outcome.best is not None and outcome.best.number == 2
    assert [v.number for v in store.kernel_versions(session)] == [1, 2]


@pytest.mark.asyncio
async def test_a_kernel_judged_before_keeps_its_verdict_and_its_version(bench: Bench) -> None:
    # iteration 2's implementer writes iteration 1's accepted kernel again, restyled
    restyled = "# once more\n" + GOOD.replace("    ", "  ")
    provider = RoleProvider(
        {
            "planner": [plan("a"), plan("b")],
            "implementer": [kernel(GOOD), kernel(restyled)],
            "profiler": [DIAGNOSIS] * 2,
        }
    )
    engine = bench.engine(provider, max_iterations=2, patience=5, edge_cases=False)
    await engine.run()

    store, session = bench.store, engine.session_id
    assert bench.tools.evaluated == [GOOD]
    (earlier,) = events(store, session, EarlierVerdict)
    assert (earlier.step, earlier.version_number, earlier.verdict) == (
        "i2/implement",
        1,
        "accepted",
    )
    assert earlier.judged_at == "i1/implement"
    assert [v.number for v in store.kernel_versions(session)] == [1]  # no version for a repeat
    assert bench.tools.profiled == [(GOOD, False)]  # nor a second profile: nothing new to do
    assert len(provider.prompts("profiler")) == 1
    lines = [line for line in map(describe, events(store, session)) if line]
    assert any(
        "v1 again: not evaluated; its earlier verdict (at i1/implement): ACCEPTED" in line
        for line in lines
    )


@pytest.mark.asyncio
async def test_a_kernel_the_engineer_rejected_is_not_proposed_again(bench: Bench) -> None:
    slower = set_tunables(GOOD, {"BLOCK_ROWS": 128})
    gate = ScriptedGate(
        [
            Decision(APPROVE),  # the plan
            Decision(REJECT, feedback="128-row blocks are too small"),
            Decision(APPROVE),
        ]
    )
    provider = RoleProvider(
        {
            "planner": [plan()],
            "implementer": [kernel(slower), kernel(slower), kernel(GOOD)],
            "profiler": [DIAGNOSIS],
        }
    )
    engine = bench.engine(provider, gate=gate, mode="hitl")
    await engine.run()

    assert [p.content for p in gate.seen if p.subject == "kernel"] == [slower, GOOD]
    (repeat,) = events(bench.store, engine.session_id, ProposalRepeated)
    assert repeat.rejection == "rejected by the engineer: 128-row blocks are too small"
    assert "128-row blocks are too small" in provider.prompts("implementer")[1]
    assert bench.tools.evaluated == [GOOD]


@pytest.mark.asyncio
async def test_an_implementer_with_nothing_new_ends_the_session_and_says_so(
    bench: Bench,
) -> None:
    def judge(source: str, tools: FakeTools) -> EvalReport:
        return rejected() if source == BAD else accepted()

    provider = RoleProvider(
        {
            "planner": [plan("a"), plan("b")],
            "implementer": [kernel(BAD)] + [kernel(BAD_RESTYLED)] * 4,
            "debugger": [kernel(BAD)] * 4,
        }
    )
    tools = FakeTools(judge=judge)
    engine = bench.engine(provider, tools=tools, max_iterations=2, max_debug_attempts=1)
    outcome = await engine.run()

    store, session = bench.store, engine.session_id
    assert tools.evaluated == [BAD]
    assert "the implementer has nothing new" in outcome.reason
    assert store.session(session).status == "done"  # converged, not interrupted
    nothing = [r for r in events(store, session, ProposalRepeated) if r.nothing_new]
    assert [r.role for r in nothing] == ["debugger", "implementer"]
    lines = [line for line in map(describe, events(store, session)) if line]
    assert any(line.startswith("  implementer has nothing new") for line in lines)


@pytest.mark.asyncio
async def test_the_log_names_versions_by_the_number_users_see(bench: Bench) -> None:
    other = bench.store.create_session("12p_RMSNorm", "auto").id
    for _ in range(5):  # another session's versions push the ids past the numbers
        bench.store.add_kernel_version(other, "x = 1\n")
    provider = RoleProvider(
        {"planner": [plan()], "implementer": [kernel(BAD)], "debugger": [kernel(GOOD)]}
        | {"profiler": [DIAGNOSIS]}
    )
    engine = bench.engine(provider)
    await engine.run()

    store, session = bench.store, engine.session_id
    created = events(store, session, VersionCreated)
    judged = events(store, session, EvaluationDone)
    assert [c.number for c in created] == [1, 2]
    assert [e.version_number for e in judged] == [1, 2]
    assert created[0].version_id != 1  # ids are store-wide; the log must not show them
    lines = [line for line in map(describe, events(store, session)) if line]
    assert "  evaluation of v1: REJECTED — tpu_lower: block (12, 8192) is not a multiple of 8" in (
        lines
    )
    (ended,) = events(store, session, SessionEnded)
    assert ended.best_version_number == 2
    assert any("best kernel v2," in line for line in lines)


@pytest.mark.asyncio
async def test_the_session_ends_on_its_best_accepted_kernel_not_its_last(bench: Bench) -> None:
    # iteration 1 accepts GOOD; iteration 2's kernel is rejected and its debugger has no fix
    def judge(source: str, tools: FakeTools) -> EvalReport:
        return accepted() if source == GOOD else rejected()

    provider = RoleProvider(
        {
            "planner": [plan("a"), plan("b")],
            "implementer": [kernel(GOOD), kernel(BAD)],
            "debugger": [kernel(GOOD.replace("    ", "  "))] * 4,  # GOOD again: judged, accepted
            "profiler": [DIAGNOSIS] * 2,
        }
    )
    engine = bench.engine(provider, tools=FakeTools(judge=judge), max_iterations=2, patience=5)
    assert best_at_end(bench.store, engine.session_id) is None  # not ended yet
    await engine.run()

    versions = bench.store.kernel_versions(engine.session_id)
    assert versions[-1].source == BAD  # the last version tried was rejected
    ended = best_at_end(bench.store, engine.session_id)
    assert ended is not None and ended.version is not None
    assert ended.version.source == GOOD and ended.version.number == 1
    assert ended.report is not None and ended.report.verdict == "accepted"
    assert ended.profile is not None and "v1" in ended.words()


@pytest.mark.asyncio
async def test_a_session_without_an_accepted_kernel_says_so_at_its_end(bench: Bench) -> None:
    provider = RoleProvider(
        {"planner": [plan()], "implementer": [kernel(BAD)], "debugger": [kernel(BAD)] * 4}
    )
    engine = bench.engine(provider, tools=FakeTools(judge=lambda s, t: rejected()))
    await engine.run()
    ended = best_at_end(bench.store, engine.session_id)
    assert ended is not None and ended.version is None and ended.report is None
    assert "without an accepted kernel" in ended.words()


@pytest.mark.asyncio
async def test_a_kernel_rejected_before_the_edge_cases_joined_stays_rejected(
    bench: Bench,
) -> None:
    # BAD is rejected at i1/implement; GOOD is accepted and the edge case joins every later
    # verdict; the debugger of iteration 2 offers BAD again: rejected at fewer configurations,
    # it is rejected at more, and is not evaluated again
    def judge(source: str, tools: FakeTools) -> EvalReport:
        return rejected() if source in (BAD, CHUNKED) else accepted()

    edge = {"name": "edge_hidden", "params": {"hidden": 384}, "why": "3 lane tiles"}
    provider = RoleProvider(
        {
            "planner": [plan("a"), plan("b")],
            "implementer": [kernel(BAD), kernel(CHUNKED)],
            "debugger": [kernel(GOOD), kernel(BAD), kernel(GOOD.replace("    ", "  "))],
            "tester": [json.dumps({"configs": [edge]})],
            "profiler": [DIAGNOSIS] * 2,
        }
    )
    tools = FakeTools(judge=judge, edges=frozenset({"edge_hidden"}))
    engine = bench.engine(provider, tools=tools, max_iterations=2, patience=5)
    await engine.run()

    assert tools.evaluated.count(BAD) == 1
    repeats = events(bench.store, engine.session_id, ProposalRepeated)
    assert [(r.step, r.rejection.split(":")[0]) for r in repeats] == [("i2/debug1", "v1, rejected")]
