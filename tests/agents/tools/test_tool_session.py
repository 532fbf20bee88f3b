"""The tools for real: `lower` and `check` through the harness's isolated candidate worker, and a
session on 12p in which the implementer, through the real google-genai client, looks an API up
in the installed jax, lowers its draft for TPU and proposes the kernel the harness accepts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from maxkernel_tui.agents.llm.gemini import GeminiProvider
from maxkernel_tui.agents.llm.types import ToolCall
from maxkernel_tui.agents.orchestration.events import EvaluationDone, ToolAnswered, decode
from maxkernel_tui.agents.orchestration.tools import build_tools
from maxkernel_tui.agents.roles.context import StepContext
from maxkernel_tui.agents.tools.runner import Toolbox
from maxkernel_tui.agents.tools.specs import ToolName
from maxkernel_tui.kernels.service.setup import EvalOptions, EvaluationSetup
from maxkernel_tui.kernels.task import Task
from tests.fakes.role_gemini import RoleGemini
from tests.fakes.role_provider import NO_EDGE_CASES
from tests.fakes.scripted import Answer
from tests.support.engine import BAD, DIAGNOSIS, GOOD, kernel, plan
from tests.support.llm import GEMINI_KEY

pytestmark = pytest.mark.slow  # the harness's workers


def test_lower_and_check_answer_with_the_harness_s_checks(rmsnorm: Task, tmp_path: Path) -> None:
    tools = build_tools(
        EvaluationSetup.local(EvalOptions(target="v5e")), rmsnorm, tmp_path / "traces"
    )
    box = Toolbox(rmsnorm, "v5e", tmp_path / "tools", prober=tools, profiler=tools)
    ctx = StepContext(task_dir=str(rmsnorm.folder), target="v5e")
    offered = (ToolName.LOWER, ToolName.CHECK)

    async def both() -> tuple[str, str]:
        lowered = await box.run(ToolCall("1", "lower", {"source": BAD}), offered, ctx)
        checked = await box.run(ToolCall("2", "check", {"source": GOOD}), offered, ctx)
        assert lowered.ok and checked.ok  # the tool worked; the kernel's failure is its answer
        return lowered.text, checked.text

    try:
        lowered, checked = asyncio.run(both())
    finally:
        tools.close()
        box.close()
    assert lowered.startswith("failed at tpu_lower: ") and "✗ tpu_lower" in lowered
    assert "divisible by 8 and 128" in lowered or "block shape" in lowered.lower(), lowered
    assert "✓ tpu_compile" in checked and "✓ numerics" in checked, checked
    assert checked.startswith("passed: checked at check for TPU v5e")
    assert "at check shapes" in checked and "production" not in checked  # no defences either


def test_the_implementer_looks_up_lowers_and_proposes_a_kernel_the_harness_accepts(
    open_on, store
) -> None:
    first = Answer(
        ["I will check the BlockSpec signature and lower my draft."],
        tool_calls=[("jax_api", {"name": "pl.BlockSpec"}), ("lower", {"source": GOOD})],
    )
    answers = {
        "planner": [plan()],
        "implementer": [first, kernel(GOOD)],
        "profiler": [DIAGNOSIS],
        "tester": [NO_EDGE_CASES],
    }

    async def session() -> tuple[str, RoleGemini]:
        server = await RoleGemini(answers).start()
        provider = GeminiProvider("gemini-2.5-flash", base_url=server.url, api_key=GEMINI_KEY)
        try:
            opened = await open_on(provider)
            await opened.engine.run()
            await opened.aclose()
        finally:
            await server.stop()
        return opened.session_id, server

    session_id, server = asyncio.run(session())
    stored = [decode(e.kind, e.payload) for e in store.events(session_id)]
    results = [e for e in stored if isinstance(e, ToolAnswered)]
    assert [(r.name, r.ok) for r in results] == [("jax_api", True), ("lower", True)]
    assert "BlockSpec(block_shape" in results[0].text
    assert results[1].text.startswith("passed: compiled at bench") and "✓ tpu_compile" in (
        results[1].text
    )
    verdicts = [(e.step, e.verdict) for e in stored if isinstance(e, EvaluationDone)]
    assert verdicts[0] == ("i1/implement", "accepted")
    assert server.roles.count("implementer") == 2
