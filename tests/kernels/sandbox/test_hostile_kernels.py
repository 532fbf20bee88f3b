"""Hostile kernels against the evaluation, one per route out of it: read another process's
environment, write outside the private directory, run code through a pickle, reach `os` through
an allowed module, reach a server on 127.0.0.1, leave a detached process, rewrite the task's
reference. Each runs with the static rules switched OFF (so that only the OS sandbox stands in
its way) and ON (they name none of these routes any more: the outcome is the same); each must be
contained: no secret in the report, no file outside, no request at the server, no process left,
the task unchanged, and the report saying what was tried."""

from __future__ import annotations

import http.server
import json
import os
import secrets
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from maxkernel_tui.kernels.evaluation import harness as harness_module
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.checks import Check, EvalReport
from maxkernel_tui.kernels.report.reasons import Reason, Said
from maxkernel_tui.kernels.task import Task
from tests.support import hostile_kernels as hostile
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow  # candidate and reference jax worker processes

SECRET = "sk-hostile-" + secrets.token_hex(8)
QUICK = EvalOptions(seeds=1, timeout=120)


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return load_task(hostile.write_task(tmp_path / "task"))


@pytest.fixture(params=["static rules off", "static rules on"])
def static_rules(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Off: the harness's static check passes everything, so the sandbox alone is tested."""
    on = request.param == "static rules on"
    if not on:
        monkeypatch.setattr(harness_module, "broken_rules", lambda *args, **kwargs: [])
    return on


def _evaluate(harness: Harness, source: str, task: Task, tmp_path: Path) -> EvalReport:
    kernel = tmp_path / "kernels" / "hostile.py"
    kernel.parent.mkdir(exist_ok=True)
    kernel.write_text(source)
    return harness.evaluate(KernelSource.read(kernel), task, QUICK)


def _contained(report: EvalReport, tried: str) -> None:
    """Rejected, past the static rules, with the sandbox naming `tried`."""
    assert report.verdict == "rejected"
    assert SECRET not in json.dumps(report.to_json())
    assert report.checks[0].name == "static" and report.checks[0].status == "pass"
    sandbox = [c for c in report.checks if c.name == "sandbox"]
    assert sandbox and sandbox[0].reason == Reason.CONFINED
    refused = [c.figures for c in sandbox if c.reason == Reason.SANDBOX_REFUSED]
    assert any(isinstance(r, Said) and tried in r.text for r in refused), report.checks


@pytest.fixture
def process_with_a_key() -> Iterator[int]:
    """Another process of this user whose environment holds an API key (as the command's and
    the TUI's do)."""
    process = subprocess.Popen(["sleep", "600"], env={"GEMINI_API_KEY": SECRET})
    # Popen returns once exec has closed its error pipe, which is before the kernel records
    # where the new environment lies: /proc/PID/environ can read empty for a moment.
    environ = Path(f"/proc/{process.pid}/environ")
    wait_for(lambda: SECRET.encode() in environ.read_bytes(), timeout=10, what="the environment")
    yield process.pid
    process.kill()
    process.wait()


def test_another_processes_environment_is_out_of_reach(
    harness, task, tmp_path, static_rules, process_with_a_key
):
    assert SECRET.encode() in Path(f"/proc/{process_with_a_key}/environ").read_bytes()
    source = hostile.fill(hostile.READ_ENVIRON, secret=SECRET)
    report = _evaluate(harness, source, task, tmp_path)
    assert SECRET not in json.dumps(report.to_json())
    # nothing found, so the honest part ran: the sandbox hid the other environments
    assert report.verdict == "accepted", report.failure


def test_a_task_file_changed_during_the_evaluation_voids_it(harness, task, tmp_path):
    honest = hostile.fill(hostile.HONEST_BODY) + "\n\ndef computation(x):\n    return _honest(x)\n"
    kernel = tmp_path / "honest.py"
    kernel.write_text(honest)

    def edit_on_trace(check: Check) -> None:
        if check.name == "trace":
            with task.reference_path.open("a") as file:
                file.write("# edited while judged\n")

    report = harness.evaluate(KernelSource.read(kernel), task, QUICK, on_check=edit_on_trace)
    assert report.verdict == "rejected"
    assert report.failure.name == "task"
    assert report.failure.reason == Reason.TASK_CHANGED
    assert "reference.py was modified" in report.failure.figures.text


def test_no_file_is_written_outside_the_private_directory(harness, task, tmp_path, static_rules):
    cache = Path(os.environ.get("MAXKERNEL_TUI_CACHE_DIR", tmp_path / "cache"))
    targets = [
        str(tmp_path / "planted"),
        f"/tmp/mkt-planted-{secrets.token_hex(4)}",
        str(cache / f"planted-{secrets.token_hex(4)}"),
        str(cache / "xla" / f"planted-{secrets.token_hex(4)}"),
    ]
    report = _evaluate(
        harness, hostile.fill(hostile.WRITE_OUTSIDE, targets=repr(targets)), task, tmp_path
    )
    planted = [p for t in targets for p in (t, t + ".npy", t + ".txt") if Path(p).exists()]
    assert planted == []
    _contained(report, f"write {targets[0]}")


def test_a_pickle_runs_no_command(harness, task, tmp_path, static_rules):
    marker = tmp_path / "pickled-command-ran"
    report = _evaluate(
        harness, hostile.fill(hostile.PICKLE_CODE, marker=str(marker)), task, tmp_path
    )
    assert not marker.exists()
    _contained(report, "unpickle a class")


def test_os_reached_through_an_allowed_module_starts_nothing(harness, task, tmp_path, static_rules):
    marker = tmp_path / "os-command-ran"
    source = hostile.fill(hostile.OS_THROUGH_ALLOWED, marker=str(marker))
    report = _evaluate(harness, source, task, tmp_path)
    assert not marker.exists()
    _contained(report, "run a shell command")


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"1 2 3\n")

    def log_message(self, *args: object) -> None:
        pass


def test_no_request_reaches_a_server_on_the_loopback(harness, task, tmp_path, static_rules):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = str(server.server_address[1])
        report = _evaluate(harness, hostile.fill(hostile.REACH_NETWORK, port=port), task, tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert _Recorder.seen == []
    _contained(report, "open a URL")


def _processes_named(name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == name:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_detached_process_ends_with_its_evaluation(harness, task, tmp_path, static_rules):
    name = "mkt" + secrets.token_hex(5)  # the kernel's grandchild takes this name
    report = _evaluate(harness, hostile.fill(hostile.DETACHED_PROCESS, name=name), task, tmp_path)
    wait_for(lambda: not _processes_named(name), timeout=20, what=f"process {name} gone")
    _contained(report, "fork a process")


def test_the_tasks_reference_cannot_be_rewritten(harness, task, tmp_path, static_rules):
    reference = task.reference_path
    before = reference.read_bytes()
    source = hostile.fill(
        hostile.REWRITE_REFERENCE, reference=str(reference), fake=repr(hostile.FAKE_REFERENCE)
    )
    report = _evaluate(harness, source, task, tmp_path)
    assert reference.read_bytes() == before
    assert report.verdict == "rejected"  # the kernel ignores its inputs: wrong numerics
    assert report.failure.name in ("sandbox", "numerics"), report.failure
    tried = [c.detail for c in report.checks if c.name == "sandbox" and c.status == "fail"]
    assert tried and f"write {reference}" in tried[0]


def test_the_cached_production_inputs_are_read_in_place_and_cannot_be_rewritten(
    task, tmp_path, static_rules, monkeypatch
):
    """Candidates read the production tiles' inputs where the cache keeps them; a kernel that
    writes over them (to make the next kernel's tiles run on other inputs than the reference's)
    changes nothing."""
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(tmp_path / "cache"))
    with_tiles = EvalOptions(seeds=1, timeout=120, tile_blocks=4)
    honest = hostile.fill(hostile.HONEST_BODY) + "\n\ndef computation(x):\n    return _honest(x)\n"
    with Harness() as own:
        (tmp_path / "honest.py").write_text(honest)
        assert (
            own.evaluate(KernelSource.read(tmp_path / "honest.py"), task, with_tiles).verdict
            == "accepted"
        )
        inputs = sorted((tmp_path / "cache" / "production-inputs").glob("*/input-*.npy"))
        assert inputs  # made once, kept for the next evaluation
        before = [path.read_bytes() for path in inputs]
        targets = [str(path.with_suffix("")) for path in inputs]  # np.save adds .npy back
        source = hostile.fill(hostile.WRITE_OUTSIDE, targets=repr(targets))
        kernel = tmp_path / "kernels" / "hostile.py"
        kernel.parent.mkdir()
        kernel.write_text(source)
        report = own.evaluate(KernelSource.read(kernel), task, with_tiles)
    assert [path.read_bytes() for path in inputs] == before
    assert not [t for t in targets for p in (t, t + ".txt") if Path(p).exists()]
    _contained(report, f"write {targets[0]}")
