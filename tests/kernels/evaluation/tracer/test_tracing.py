"""What the harness believes from the tracer (evaluation/tracer/tracing.py), the process that
imports a candidate: only failures and program files it wrote itself, as plain files within the
limit.
Fast: a fake tracer (a few lines of Python speaking the protocol) stands in for the real one,
whose lies tests/kernels/sandbox/test_tracer_lies.py tells through real kernels."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from maxkernel_tui.kernels.evaluation.protocol import TraceRequest
from maxkernel_tui.kernels.evaluation.tracer import tracing
from maxkernel_tui.kernels.report.checks import FAIL, Check, EvalReport
from maxkernel_tui.kernels.report.reasons import (
    Configs,
    Reason,
    Said,
    TracerClaim,
    Unbelievable,
)
from maxkernel_tui.kernels.workers import LineWorker

JUDGES_CHECK = TracerClaim.JUDGES_CHECK

# A tracer that says `lines` (JSON, one per line) after its greeting, then waits to be closed.
FAKE_TRACER = """
import json, sys
print(json.dumps({"ready": True}), flush=True)
sys.stdin.readline()
for line in json.loads(sys.argv[1]):
    print(line, flush=True)
sys.stdin.read()
"""
SANDBOX_PASS = {"check": {"name": "sandbox", "status": "pass", "detail": "ran confined"}}


def _trace(tmp_path: Path, lines: list[dict], configs=("bench", "check")):
    worker = LineWorker(
        [sys.executable, "-c", FAKE_TRACER, json.dumps([json.dumps(x) for x in lines])],
        dict(os.environ),
    )
    report = EvalReport("t", "k.py", [], device="here")
    request = TraceRequest(str(tmp_path / "kernel.py"), "/task", list(configs), str(tmp_path))
    try:
        return tracing.trace_programs(worker, request, 30, report), report
    finally:
        worker.close()


def _traced(config: str, file: Path) -> dict:
    return {"traced": {"config": config, "file": str(file), "seconds": 0.1}}


def test_the_programs_the_tracer_wrote_in_its_directory_are_read(tmp_path):
    (tmp_path / "program-0.bin").write_bytes(b"bench program")
    (tmp_path / "program-1.bin").write_bytes(b"check program")
    lines = [
        SANDBOX_PASS,
        _traced("bench", tmp_path / "program-0.bin"),
        _traced("check", tmp_path / "program-1.bin"),
        {"done": {}},
    ]
    traced, report = _trace(tmp_path, lines)
    assert traced is not None and report.failure is None
    assert traced.programs == {"bench": b"bench program", "check": b"check program"}
    judge = tmp_path / "judge"
    judge.mkdir()
    files = traced.write(judge)
    assert Path(files["check"]).read_bytes() == b"check program"
    assert Path(files["bench"]).parent == judge


@pytest.mark.parametrize(
    ("claim", "said"),
    [
        (
            {"check": {"name": "numerics", "status": "pass", "detail": "ok"}},
            Unbelievable(JUDGES_CHECK, "numerics", "pass"),
        ),
        (
            {"check": {"name": "trace", "status": "pass", "detail": "ok"}},
            Unbelievable(JUDGES_CHECK, "trace", "pass"),
        ),
        (
            {"check": {"name": "sandbox", "status": "pass", "detail": "again"}},
            Unbelievable(JUDGES_CHECK, "sandbox", "pass"),
        ),
        (
            {"check": {"name": "timing", "status": "fail", "detail": "x"}},
            Unbelievable(JUDGES_CHECK, "timing", "fail"),
        ),
        (
            {"run": {"config": "check", "seed": 1, "files": []}},
            Unbelievable(TracerClaim.JUDGES_EVENT, "NumericsRun"),
        ),
        (
            {"tiles": {"config": "bench", "input_seed": 0, "sample_seed": 1}},
            Unbelievable(TracerClaim.JUDGES_EVENT, "TilesRun"),
        ),
        (
            _traced("heldout", Path("/x/program-0.bin")),
            Unbelievable(TracerClaim.UNASKED_PROGRAM, "heldout"),
        ),
    ],
)
def test_anything_but_a_failure_or_a_program_rejects_the_kernel(tmp_path, claim, said):
    traced, report = _trace(tmp_path, [SANDBOX_PASS, claim, {"done": {}}])
    assert traced is None and report.failure.name == "trace"
    assert report.failure.reason == Reason.TRACER_UNBELIEVABLE
    assert report.failure.figures == said  # what the tracer did


def test_a_program_sent_twice_rejects_the_kernel(tmp_path):
    (tmp_path / "program-0.bin").write_bytes(b"p")
    twice = _traced("bench", tmp_path / "program-0.bin")
    traced, report = _trace(tmp_path, [SANDBOX_PASS, twice, twice, {"done": {}}])
    assert traced is None and report.failure.reason == Reason.TRACER_UNBELIEVABLE
    assert report.failure.figures == Unbelievable(TracerClaim.UNASKED_PROGRAM, "bench")


def test_a_failed_trace_is_believed_and_stops_there(tmp_path):
    failed = Check("trace", FAIL, Reason.IMPORT_FAILED, Said("boom"))
    traced, report = _trace(tmp_path, [SANDBOX_PASS, {"check": failed.to_json()}, {"done": {}}])
    assert traced is None and report.failure == failed
    assert [c.name for c in report.checks] == ["sandbox", "trace"]


def test_a_missing_program_rejects_the_kernel(tmp_path):
    (tmp_path / "program-0.bin").write_bytes(b"p")
    lines = [SANDBOX_PASS, _traced("bench", tmp_path / "program-0.bin"), {"done": {}}]
    traced, report = _trace(tmp_path, lines)
    assert traced is None and report.failure.reason == Reason.TRACER_NO_PROGRAM
    assert report.failure.figures == Configs(("check",))


def test_a_line_that_is_not_the_protocol_rejects_the_kernel(tmp_path):
    traced, report = _trace(tmp_path, [SANDBOX_PASS, {"nonsense": 1}, {"done": {}}])
    assert traced is None and report.failure.reason == Reason.TRACER_NOT_PROTOCOL


def test_only_plain_files_directly_in_the_tracers_directory_within_the_limit_are_read(
    tmp_path, monkeypatch
):
    directory = tmp_path / "tracer"
    directory.mkdir()
    (directory / "program-0.bin").write_bytes(b"p" * 10)
    assert tracing.read_program(directory / "program-0.bin", directory) == b"p" * 10
    secret = tmp_path / "secret"
    secret.write_text("not the tracer's")
    (directory / "link.bin").symlink_to(secret)
    os.mkfifo(directory / "fifo.bin")
    (directory / "sub").mkdir()
    (directory / "sub" / "deep.bin").write_bytes(b"p")
    with pytest.raises(OSError):  # O_NOFOLLOW: the link itself is refused
        tracing.read_program(directory / "link.bin", directory)
    with pytest.raises(ValueError, match="not a plain file"):
        tracing.read_program(directory / "fifo.bin", directory)
    for elsewhere in (secret, directory / "sub" / "deep.bin", directory / ".." / "secret"):
        with pytest.raises(ValueError, match="not in the tracer's directory"):
            tracing.read_program(elsewhere, directory)
    monkeypatch.setattr(tracing, "PROGRAM_MAX_BYTES", 9)
    with pytest.raises(ValueError, match="over the limit"):
        tracing.read_program(directory / "program-0.bin", directory)


def test_a_configuration_the_kernel_cannot_be_traced_at_is_passed_on_with_its_reason(tmp_path):
    """Not a rejection here: the judge fails that configuration's runs with the reason, under
    that configuration's check (a held-out failure stays a held-out failure)."""
    (tmp_path / "program-0.bin").write_bytes(b"p")
    lines = [
        SANDBOX_PASS,
        _traced("bench", tmp_path / "program-0.bin"),
        {"traced": {"config": "check", "error": "fails to trace at 'check' shapes: boom"}},
        {"done": {}},
    ]
    traced, report = _trace(tmp_path, lines)
    assert traced is not None and report.failure is None
    assert traced.programs == {"bench": b"p"}
    assert traced.untraced == {"check": "fails to trace at 'check' shapes: boom"}
