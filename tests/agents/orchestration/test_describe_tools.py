"""The lines the Agents pane and the headless CLI show for tool calls, their results and the
models that answered."""

from __future__ import annotations

from maxkernel_tui.agents.orchestration.describe import describe
from maxkernel_tui.agents.orchestration.events import (
    LlmAnswer,
    SessionStarted,
    ToolAnswered,
    ToolsCalled,
)


def test_the_agents_pane_lines_name_the_calls_their_results_and_the_models() -> None:
    roles = {"implementer": {"model": "gemini-3.1-pro", "tools": ["lower"], "max_tool_calls": 8}}
    started = SessionStarted("start", "/t", "12p", "auto", "v5e", "gemini", "flash", {}, roles)
    assert describe(started) == (
        "session on 12p: auto, TPU v5e, provider gemini (flash; implementer gemini-3.1-pro)"
    )
    source = "import jax\n\ndef computation(x):\n    return x\n"
    turn = ToolsCalled(
        "r",
        "i1/implement",
        "implementer",
        0,
        "",
        [{"name": "lower", "arguments": {"source": source, "config": "bench"}}],
        "gemini-3.1-pro",
        1200,
        0.01,
    )
    assert describe(turn) == (
        "  implementer calls lower(source: 5 lines, config='bench') (gemini-3.1-pro, 1200 tokens)"
    )
    failed = ToolAnswered("r2", "i1/implement", "implementer", "c", "lower", {}, True, "✗ x\ny", 2)
    assert describe(failed) == "    lower → ✗ x  [2.0s]"
    answer = LlmAnswer("r3", "i1/implement", "implementer", "text", "gemini-3.1-pro", 99, None)
    assert describe(answer) == "  implementer answered (gemini-3.1-pro, 99 tokens)"
