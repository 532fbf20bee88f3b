"""`maxkernel-tui run` as a user runs it: a subprocess talking to a fake Gemini server through the
real google-genai client; the kernel it writes is accepted by `eval`; SIGKILL and `--resume`; the
exit status of a session that ends on an error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from maxkernel_tui.store.db import Store
from tests.fakes.role_gemini import RoleGemini, ServedInThread
from tests.fakes.role_provider import NO_EDGE_CASES
from tests.fakes.scripted import Fail
from tests.support.cli_runs import KEY, command, finished
from tests.support.engine import BAD, DIAGNOSIS, GOOD, kernel, plan

# a CLI subprocess with the real harness and profiler in worker processes: minutes
# the heavy tier: the engine's fake-tool tests cover the same behaviour in the fast tier
pytestmark = [pytest.mark.slow, pytest.mark.heavy]


def answers() -> dict[str, list[str]]:
    return {
        "planner": [plan("first"), plan("second")],
        "implementer": [kernel(BAD), kernel(GOOD)],
        "debugger": [kernel(GOOD), kernel(GOOD)],
        "profiler": [DIAGNOSIS, DIAGNOSIS],
        "tester": [NO_EDGE_CASES],
    }


RUN = (
    "run",
    "--task",
    "12p",
    "--mode",
    "auto",
    "--provider",
    "gemini",
    "--model",
    "gemini-2.5-flash",
    "--max-iterations",
    "2",
    "--patience",
    "5",
    "--tune-candidates",
    "2",
    "--json",
)


def test_auto_run_through_gemini_writes_a_kernel_that_eval_accepts(
    env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "best.py"
    with ServedInThread(RoleGemini(answers())) as server:
        env["GOOGLE_GEMINI_BASE_URL"] = server.url
        done = finished(command(*RUN, "--out", str(out)), env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert server.roles == [
        "planner",
        "implementer",
        "debugger",
        "tester",
        "profiler",
        "planner",
        "implementer",  # proposes v2 again: judged and profiled once, so no profiler this time
    ]
    events = [json.loads(line) for line in done.stdout.splitlines()]
    evaluations = [e for e in events if e["kind"] == "evaluation"]
    assert evaluations[0]["verdict"] == "rejected" and evaluations[0]["failure"].startswith(
        "tpu_lower"
    )
    assert evaluations[1]["verdict"] == "accepted" and evaluations[1]["step"] == "i1/debug1"
    assert any(e["kind"] == "note" and e["role"] == "autotuner" for e in events)
    assert any(e["kind"] == "step_started" and e["step"] == "i2/plan" for e in events)
    assert KEY not in done.stdout + done.stderr
    # Every event the run printed is in the store, in the same order.
    with Store(tmp_path / "data" / "sessions.db") as store:
        (summary,) = store.list_sessions()
        stored = [e.payload["ref"] for e in store.events(summary.session.id)]
    assert stored == [e["ref"] for e in events]
    accepted = finished(command("eval", str(out), "--task", "12p", "--seeds", "1"), env)
    assert accepted.returncode == 0, accepted.stdout[-2000:]


def test_a_killed_run_resumes_without_repeating_stored_calls(
    env: dict[str, str], tmp_path: Path
) -> None:
    with ServedInThread(RoleGemini(answers())) as server:
        env["GOOGLE_GEMINI_BASE_URL"] = server.url
        first = subprocess.Popen(
            command(*RUN),
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
            ):  # the first kernel was judged: kill mid-session
                os.killpg(first.pid, signal.SIGKILL)
                break
        first.wait(60)
        session_id = first.stderr.read().split("session ", 1)[1].split()[0]
        served_before = list(server.roles)
        resumed = finished(
            command("run", "--resume", session_id, "--json", "--out", str(tmp_path / "k.py")), env
        )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert served_before[:2] == ["planner", "implementer"]
    # The planner's and implementer's stored answers were not bought again.
    assert server.roles.count("planner") == 2 and server.roles.count("implementer") == 2
    events = [json.loads(line) for line in resumed.stdout.splitlines()]
    assert events[-1]["kind"] == "session_ended" and events[-1]["best_version_id"] is not None
    assert not any(
        e["kind"] == "evaluation" and e["step"] == "i1/implement" for e in events
    )  # not redone


def test_ctrl_c_stops_cleanly_and_says_how_to_continue(env: dict[str, str], tmp_path: Path) -> None:
    with ServedInThread(RoleGemini(answers())) as server:
        env["GOOGLE_GEMINI_BASE_URL"] = server.url
        # A process started from a background job inherits SIGINT ignored; a terminal does not.
        with_default_sigint = [
            sys.executable,
            "-c",
            "import os, signal, sys; signal.signal(signal.SIGINT, "
            "signal.SIG_DFL); os.execv(sys.executable, sys.argv[1:])",
            *command(*RUN),
        ]
        running = subprocess.Popen(
            with_default_sigint, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert running.stdout is not None
        for line in running.stdout:
            if json.loads(line)["kind"] == "proposal":  # mid-session
                running.send_signal(signal.SIGINT)
                break
        running.stdout.read()
        assert running.wait(120) == 130
        stderr = running.stderr.read()
    session_id = stderr.split("session ", 1)[1].split()[0]
    assert f"continue with: maxkernel-tui run --resume {session_id}" in stderr
    assert "Traceback" not in stderr
    with Store(tmp_path / "data" / "sessions.db") as store:
        assert store.session(session_id).status == "stopped"


def test_a_session_that_ends_on_an_error_exits_3_and_still_writes_its_best(
    env: dict[str, str], tmp_path: Path
) -> None:
    # v1 is accepted and profiled, then the profiler's model call fails for good: the session
    # ends on a model error with an accepted kernel (exit status 0 before)
    script = {
        "planner": [plan("first")],
        "implementer": [kernel(GOOD)],
        "tester": [NO_EDGE_CASES],
        "profiler": [Fail(400, "the profiler's model refuses")],
    }
    out = tmp_path / "best.py"
    with ServedInThread(RoleGemini(script)) as server:
        env["GOOGLE_GEMINI_BASE_URL"] = server.url
        done = finished(
            command(
                *RUN[: RUN.index("--max-iterations")],
                "--max-iterations",
                "1",
                "--tune-candidates",
                "0",
                "--out",
                str(out),
            ),
            env,
        )
    assert done.returncode == 3, done.stderr[-3000:]
    assert "the session ended on an error: model error:" in done.stderr
    assert "Traceback" not in done.stderr
    assert out.read_text() == GOOD  # the accepted kernel is not lost
    with Store(tmp_path / "data" / "sessions.db") as store:
        (summary,) = store.list_sessions()
    assert summary.session.status == "failed"
