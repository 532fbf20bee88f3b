"""The gate of `run --mode hitl`: keys on standard input, edits in $EDITOR."""

from __future__ import annotations

import io
import sys

import pytest

from maxkernel_tui.agents.orchestration.gates import (
    APPROVE,
    EDIT,
    HANDOFF,
    REJECT,
    Proposal,
)
from maxkernel_tui.commands.terminal_gate import TerminalGate

pytestmark = pytest.mark.asyncio

PROPOSAL = Proposal(
    "i1/implement", "implementer", "kernel", "BLOCK_ROWS = 256\n", "BLOCK_ROWS = 128\n", "+1 −1"
)


async def decide(monkeypatch: pytest.MonkeyPatch, typed: str, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setattr(sys, "stdin", io.StringIO(typed))
    decision = await TerminalGate().decide(PROPOSAL)
    return decision, capsys.readouterr().out


async def test_it_shows_the_diff_and_approves(monkeypatch, capsys) -> None:
    decision, shown = await decide(monkeypatch, "a\n", capsys)
    assert decision.action == APPROVE
    assert "-BLOCK_ROWS = 128" in shown and "+BLOCK_ROWS = 256" in shown


async def test_reject_asks_why_and_unknown_keys_ask_again(monkeypatch, capsys) -> None:
    decision, shown = await decide(monkeypatch, "x\nr\ntoo small\n", capsys)
    assert decision.action == REJECT and decision.feedback == "too small"
    assert shown.count("[a]pprove") == 2


async def test_edit_opens_the_editor_and_hand_off_goes_to_auto(
    monkeypatch, capsys, tmp_path
) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/256/512/' \"$1\"\n")
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    decision, _ = await decide(monkeypatch, "e\n", capsys)
    assert decision.action == EDIT and decision.content == "BLOCK_ROWS = 512\n"
    decision, _ = await decide(monkeypatch, "h\n", capsys)
    assert decision.action == HANDOFF and decision.mode == "auto"


async def test_closed_input_stops_instead_of_approving(monkeypatch, capsys) -> None:
    with pytest.raises(EOFError):
        await decide(monkeypatch, "", capsys)


async def test_an_agent_with_nothing_new_is_said_so_and_the_reason_asks_it_again(
    monkeypatch, capsys
) -> None:
    current = "BLOCK_ROWS = 128\n"
    asked = Proposal(
        "i1/implement.4/nothing-new",
        "implementer",
        "kernel",
        current,
        current,
        "every kernel it can write was turned down",
        nothing_new=True,
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO("r\nsplit K\n"))
    decision = await TerminalGate().decide(asked)
    shown = capsys.readouterr().out
    assert "implementer has nothing else to offer: every kernel it can write" in shown
    assert "[r] says what to try" in shown
    assert decision.action == REJECT and decision.feedback == "split K"
