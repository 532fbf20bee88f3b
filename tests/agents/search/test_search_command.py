"""`maxkernel-tui search` as a user runs it, through the real google-genai client and a fake Gemini
server: killed with SIGKILL in the middle, resumed, it ends with the nodes and evaluations an
uninterrupted search has, pays for no stored answer twice, and writes its best accepted kernel."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from maxkernel_tui.store.db import Store
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
