"""The gate of `run --mode hitl` on a terminal: show the proposal's diff, ask for a key."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from maxkernel_tui.agents.orchestration import diffs
from maxkernel_tui.agents.orchestration.gates import (
    APPROVE,
    EDIT,
    HANDOFF,
    REJECT,
    Decider,
    Decision,
    Proposal,
    Subject,
)
from maxkernel_tui.store.kinds import Mode

_PROMPT = "[a]pprove  [e]dit in $EDITOR  [r]eject with a reason  [h]and off to Auto > "


class TerminalGate:
    name = Decider.INTERACTIVE

    async def decide(self, proposal: Proposal) -> Decision:
        if proposal.nothing_new:
            print(
                f"\n── {proposal.role} has nothing else to offer: {proposal.summary} ──\n"
                f"[a] goes on with the current {proposal.subject}, [e] edits it, [r] says what "
                "to try (the agent is asked again with it)"
            )
        else:
            print(f"\n── {proposal.role} proposes a {proposal.subject} ({proposal.summary}) ──")
        shown = (
            diffs.unified(proposal.previous, proposal.content)
            if proposal.previous
            else proposal.content
        )
        print(shown)
        while True:
            answer = (await _ask(_PROMPT)).strip().lower()
            if answer in ("a", "approve"):
                return Decision(APPROVE)
            if answer in ("h", "handoff"):
                return Decision(HANDOFF, mode=Mode.AUTO)
            if answer in ("r", "reject"):
                return Decision(REJECT, feedback=(await _ask("why? > ")).strip() or None)
            if answer in ("e", "edit"):
                edited = await asyncio.to_thread(
                    _edit, proposal.content, ".py" if proposal.subject == Subject.KERNEL else ".md"
                )
                if edited.strip() and edited != proposal.content:
                    return Decision(EDIT, content=edited)
                print("no change made; the proposal is still waiting")


async def _ask(prompt: str) -> str:
    line = await asyncio.to_thread(_read_line, prompt)
    if line is None:
        raise EOFError("standard input closed while a proposal was waiting")
    return line


def _read_line(prompt: str) -> str | None:
    print(prompt, end="", flush=True)
    line = sys.stdin.readline()
    return line if line else None


def _edit(content: str, suffix: str) -> str:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory(prefix="mkt-edit-") as folder:
        path = Path(folder) / f"proposal{suffix}"
        path.write_text(content, encoding="utf-8")
        subprocess.run([*shlex.split(editor), str(path)], check=False)
        return path.read_text(encoding="utf-8")
