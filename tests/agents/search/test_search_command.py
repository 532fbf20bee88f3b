"""`maxkernel-tui search` as a user runs it, through the real google-genai client and a fake Gemini
server: killed with SIGKILL in the middle, resumed, it ends with the nodes and evaluations an
uninterrupted search has, pays for no stored answer twice, and writes its best accepted kernel."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from maxkernel_tui.agents.search.graph import Node
from maxkernel_tui.agents.search.steering import given
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.steering import taken_up
from tests.fakes.role_gemini import RoleGemini, ServedInThread
from tests.support.cli_runs import command, finished
from tests.support.engine import graph_from_events, graph_in_store, variant

# a CLI subprocess with the real harness and profiler in worker processes: minutes
# the heavy tier: the engine's fake-tool tests cover the same behaviour in the fast tier
pytestmark = [pytest.mark.slow, pytest.mark.heavy]

# parallel, two lines, budget 3: the root (1 evaluation), one node per line (2): 3 nodes and
# 3 evaluations
SEARCH = (
    "search",
    "--task",
    "12p",
    "--algorithm",
    "parallel",
    "--width",
    "2",
    "--depth",
    "3",
    "--max-evals",
    "3",
    "--provider",
    "gemini",
    "--model",
    "gemini-2.5-flash",
    "--json",
)


def test_a_killed_search_resumes_to_the_same_graph_and_writes_its_best(env, tmp_path) -> None:
    answers = {"implementer": [variant(256), variant(128), variant(512), variant(64)]}
    with ServedInThread(RoleGemini(answers)) as server:
        env["GOOGLE_GEMINI_BASE_URL"] = server.url
        first = subprocess.Popen(
            command(*SEARCH),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert first.stdout is not None
        for line in first.stdout:
            if (
                json.loads(line)["kind"] == "evaluation"
            ):  # the root was judged: kill before its profile is stored
                os.killpg(first.pid, signal.SIGKILL)
                break
        first.wait(60)
        session_id = first.stderr.read().split("search session ", 1)[1].split()[0]
        out, dot = tmp_path / "best.py", tmp_path / "graph.dot"
        resumed = finished(
            command(
                "search", "--resume", session_id, "--json", "--out", str(out), "--graph", str(dot)
            ),
            env,
        )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert server.roles.count("implementer") == 3  # the root's answer was not bought again
    events = [json.loads(line) for line in resumed.stdout.splitlines()]
    assert not any(
        e["kind"] == "evaluation" and e["step"] == "n0/implement" for e in events
    )  # not redone
    assert (
        "evaluation budget spent (3/3)" in resumed.stderr
        and "3 nodes, 3 evaluations" in resumed.stderr
    )
    with Store(tmp_path / "data" / "sessions.db") as store:
        nodes = store.search_nodes(session_id)
        assert [n.status for n in nodes] == [
            "accepted"
        ] * 3  # the root, left running, was run again
        assert graph_from_events(store, session_id) == graph_in_store(store, session_id)
        best = max(nodes, key=lambda n: n.score)
        assert out.read_text() == store.kernel_version(best.kernel_version_id).source
    assert "n0 -> n1;" in dot.read_text()


def test_a_steered_search_killed_and_resumed_keeps_its_steering(env, tmp_path) -> None:
    """`search --steer` at the start, more steering from another process while it runs
    (`--no-run`), SIGKILL, `--resume`: every action is still there and the idea grows its node."""
    idea = "keep the whole row in VMEM and fuse the scale"
    answers = {"implementer": [variant(256), variant(512), variant(128), variant(64)]}
    with ServedInThread(RoleGemini(answers)) as server:
        env["GOOGLE_GEMINI_BASE_URL"] = server.url
        steered = (*SEARCH[:6], "1", "--depth", "1", *SEARCH[9:], "--steer", f"idea@0={idea}")
        first = subprocess.Popen(
            command(*steered),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert first.stdout is not None and first.stderr is not None
        session_id = first.stderr.readline().split("search session ", 1)[1].split()[0]
        for line in first.stdout:
            if json.loads(line)["kind"] == "evaluation":  # the root was judged
                pinned = finished(
                    command("search", "--resume", session_id, "--steer", "pin@0", "--no-run"),
                    env,
                    timeout=60,
                )
                os.killpg(first.pid, signal.SIGKILL)
                break
        first.wait(60)
        assert pinned.returncode == 0 and "pin at #0" in pinned.stderr, pinned.stderr
        resumed = finished(command("search", "--resume", session_id, "--json"), env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    events = [json.loads(line) for line in resumed.stdout.splitlines()]
    taken = [e for e in events if e["kind"] == "steered"]
    assert {e["action"] for e in taken} <= {"idea", "pin"} and taken
    with Store(tmp_path / "data" / "sessions.db") as store:
        assert [s.action for s in given(store, session_id)] == ["idea", "pin"]
        assert set(taken_up(store, session_id)) == {1, 2}  # both taken up, once each
        nodes = [Node.from_row(row) for row in store.search_nodes(session_id)]
        (grown,) = [n for n in nodes if n.strategy == "idea"]
        assert grown.parents == ["n0"] and idea in grown.plan
    prompts = [str(body) for body in server.bodies_of("implementer")]
    assert any(idea in prompt for prompt in prompts)
