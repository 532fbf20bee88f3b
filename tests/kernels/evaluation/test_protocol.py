"""The evaluation's worker protocols: what a worker writes, the harness reads back the same."""

import json

import pytest

from maxkernel_tui.kernels.evaluation.protocol import (
    CandidateRequest,
    Done,
    NumericsRun,
    ReferenceAnswer,
    ReferenceRequest,
    Traced,
    TraceRequest,
    WorkerProblem,
    event_from_json,
    event_to_json,
    request_from_json,
    request_to_json,
)
from maxkernel_tui.kernels.report.checks import FAIL, PASS, Check
from maxkernel_tui.kernels.report.reasons import Reason, Target, WorkShare


def over_the_wire(data):
    return json.loads(json.dumps(data))


def test_a_candidate_request_keeps_its_runs_as_pairs():
    request = CandidateRequest(
        "/w/kernel.py",
        "/suite/12p",
        "v5e",
        "bench",
        [("check", 7), ("heldout", 9)],
        "/w",
        extra_configs={"edge_small": {"batch": 1}},
        detect_races=True,
    )
    again = request_from_json(over_the_wire(request_to_json(request)))
    assert again == request and again.runs[0] == ("check", 7)


def test_a_trace_request_and_a_judge_request_are_told_apart_on_the_wire():
    trace = TraceRequest("/w/kernel.py", "/suite/12p", ["bench", "check"], "/w", {"e": {"b": 1}})
    judge = CandidateRequest(
        "/j/kernel.py", "/suite/12p", "v5e", "bench", [], "/j", programs={"bench": "/j/p.bin"}
    )
    assert request_from_json(over_the_wire(request_to_json(trace))) == trace
    assert request_from_json(over_the_wire(request_to_json(judge))) == judge


@pytest.mark.parametrize(
    "event",
    [
        Check("trace", PASS, Reason.PALLAS_HOLDS_THE_WORK, WorkShare(1, 0.0, 2.0, "out"), 0.5),
        Check("tpu_compile", FAIL, Reason.COMPILE_FAILED, Target("v5e", "boom"), 1.0),
        NumericsRun("check", 7, files=["/w/candidate-check-7-0.npy"], races=False, seconds=0.2),
        NumericsRun("heldout", 9, error="ValueError: shapes"),
        Traced("check", "/w/program-1.bin", 0.25),
        WorkerProblem("libtpu does not know TPU 'v99'", usage=True),
        WorkerProblem("Traceback ..."),
        Done(),
    ],
)
def test_each_candidate_event_reads_back_as_it_was_written(event):
    line = over_the_wire(event_to_json(event))
    assert len(line) == 1 and event_from_json(line) == event


def test_the_wire_keys_of_candidate_events():
    assert list(event_to_json(Check("static", PASS, Reason.STATIC_OK))) == ["check"]
    assert list(event_to_json(WorkerProblem("x", usage=True))) == ["usage_error"]
    assert list(event_to_json(WorkerProblem("x"))) == ["error"]
    assert event_to_json(Done()) == {"done": {}}


def test_reference_answers_carry_runs_or_an_error():
    request = ReferenceRequest("/suite/12p", [("check", 7)], "/w/reference")
    assert ReferenceRequest.from_json(over_the_wire(request.to_json())) == request
    answer = ReferenceAnswer([NumericsRun("check", 7, files=["/w/reference/r-0.npy"])])
    assert ReferenceAnswer.from_json(over_the_wire(answer.to_json())) == answer
    failed = ReferenceAnswer(error="no such task")
    assert failed.to_json() == {"error": "no such task"}
    assert ReferenceAnswer.from_json(failed.to_json()) == failed
