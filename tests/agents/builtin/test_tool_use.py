"""The built-in agent's debugger with the `lower` tool: it lowers its fix before proposing it,
passes over a fix that did not lower for its next kernel, and proposes the one that lowered."""

from __future__ import annotations

import re

import pytest

from maxkernel_tui.agents.llm.client import LLMClient
from maxkernel_tui.agents.llm.types import Message, Request, Response, ToolCall
from maxkernel_tui.agents.providers import build_provider
from maxkernel_tui.agents.tools.specs import SPECS, ToolName
from maxkernel_tui.kernels.loader import builtin_suite_dir
from tests.support.engine import BAD

RMSNORM = builtin_suite_dir() / "12p_RMSNorm"
FAILED = "failed at tpu_lower: cannot be lowered ...\n✓ static ...\n✗ tpu_lower    cannot be ..."
PASSED = "passed: compiled at bench for TPU v5e\n✓ static ...\n✓ tpu_compile  compiled ..."


def debugger_request(*turns: Message, tools: tuple[ToolName, ...] = (ToolName.LOWER,)) -> Request:
    context = {
        "role": "debugger",
        "task_dir": str(RMSNORM),
        "target": "v5e",
        "kernel": BAD,
        "failure": {"check": "tpu_lower", "detail": "block shape (12, 8192) is not (8, 128)"},
    }
    return Request(
        (Message("user", "debugger step"), *turns),
        tools=tuple(SPECS[t] for t in tools),
        context=context,
    )


def answered(call: ToolCall, result: str) -> tuple[Message, Message]:
    return Message("assistant", "", (call,)), Message("tool", result, tool_call_id=call.id)


def source_of(response: Response) -> str:
    (block,) = re.findall(r"```python\n(.*?)```", response.text, re.DOTALL)
    return block


@pytest.mark.slow  # the agent's jax worker drafts for 12p
async def test_the_debugger_lowers_its_fix_and_moves_on_when_it_does_not_lower() -> None:
    provider = build_provider({"name": "builtin"})
    client = LLMClient(provider)
    try:
        first = await client.complete(debugger_request())
        (lower,) = first.tool_calls
        assert (lower.name, first.finish_reason) == ("lower", "tool_calls")
        assert "def computation" in lower.arguments["source"]

        refused = await client.complete(debugger_request(*answered(lower, FAILED)))
        (again,) = refused.tool_calls  # its next kernel, lowered in turn
        assert again.arguments["source"] != lower.arguments["source"]

        final = await client.complete(
            debugger_request(*answered(lower, FAILED), *answered(again, PASSED))
        )
        assert final.tool_calls == ()
        assert source_of(final).strip() == again.arguments["source"].strip()
        assert final.text.startswith("Lowered for TPU before proposing (1 kernel(s)")

        plain = await client.complete(debugger_request(tools=()))  # without the tool: as before
        assert (
            plain.tool_calls == () and source_of(plain).strip() == lower.arguments["source"].strip()
        )
    finally:
        await provider.aclose()
