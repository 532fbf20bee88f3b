"""`maxkernel-tui run` killed with SIGKILL after the implementer's tool calls were answered:
`--resume` replays the stored turn and results, so neither the model turn nor the tools run
again, and the session goes on to an accepted kernel."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.fakes.role_gemini import RoleGemini, ServedInThread
from tests.fakes.role_provider import NO_EDGE_CASES
from tests.fakes.scripted import Answer
from tests.support.cli_runs import command, env, finished
from tests.support.engine import DIAGNOSIS, GOOD, kernel, plan

__all__ = ["env"]  # the fixture

# a CLI subprocess with the real harness, twice: the heavy tier (the fast tier replays stored
# turns on fake tools in tests/agents/orchestration/test_tool_loop.py)
pytestmark = [pytest.mark.slow, pytest.mark.heavy]

RUN = ("run", "--task", "12p", "--mode", "auto", "--provider", "gemini", "--json")
LIMITS = ("--model", "gemini-2.5-flash", "--max-iterations", "1", "--tune-candidates", "0")


def test_a_run_killed_after_its_tool_calls_resumes_without_calling_again(
    env: dict[str, str], tmp_path: Path
) -> None:
    first = Answer(
        ["Checking the API and lowering my draft."],
        tool_calls=[("jax_api", {"name": "pl.BlockSpec"}), ("lower", {"source": GOOD})],
    )
    answers = {
        "planner": [plan()],
        # the answer after the tool results twice: the killed run may have bought it already
        # (its request leaves the moment `lower`'s result is stored, racing the kill) without
        # storing it, and then the resumed run buys it again
        "implementer": [first, kernel(GOOD), kernel(GOOD)],
        "profiler": [DIAGNOSIS],
        "tester": [NO_EDGE_CASES],
    }
    with ServedInThread(RoleGemini(answers)) as server:
        env["GOOGLE_GEMINI_BASE_URL"] = server.url
        running = subprocess.Popen(
            command(*RUN, *LIMITS),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert running.stdout is not None and running.stderr is not None
        seen = []
        for line in running.stdout:
            seen.append(json.loads(line))
            if seen[-1]["kind"] == "tool_result" and seen[-1]["name"] == "lower":
                os.killpg(running.pid, signal.SIGKILL)  # both results are stored: kill now
                break
        running.wait(60)
        session = running.stderr.read().split("session ", 1)[1].split()[0]
        lowered = tmp_path / "data" / "sessions" / session / "tools" / "tool-1.py"
        written = lowered.stat().st_mtime_ns
        asked_before = list(server.roles)
        resumed = finished(
            command("run", "--resume", session, "--json", "--out", str(tmp_path / "k.py")), env
        )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert [e["name"] for e in seen if e["kind"] == "tool_result"] == ["jax_api", "lower"]
    raced = asked_before[2:] == ["implementer"]  # the answer after the results, not stored
    assert asked_before == ["planner", "implementer"] + (["implementer"] if raced else [])
    # one more implementer turn (the answer after the results); the stored one was not bought
    resumed_roles = ["implementer", "tester", "profiler"]
    assert server.roles == asked_before + resumed_roles
    last = server.bodies_of("implementer")[-1]
    results = [
        p["functionResponse"]["response"]["result"]
        for c in last["contents"]
        for p in c.get("parts", [])
        if "functionResponse" in p
    ]
    assert "BlockSpec(block_shape" in results[0] and "✓ tpu_compile" in results[1]
    assert lowered.stat().st_mtime_ns == written  # `lower` did not run again
    events = [json.loads(line) for line in resumed.stdout.splitlines()]
    assert not any(e["kind"] in ("tools_called", "tool_result") for e in events)
    assert any(e["kind"] == "evaluation" and e["verdict"] == "accepted" for e in events)
    assert "def computation" in (tmp_path / "k.py").read_text()
