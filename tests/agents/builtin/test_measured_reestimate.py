"""`benchmarks/measured_v5e.py reestimate`: a measured kernel's record is appended again with
today's model figures for the same file, its measurements untouched, so the measured table
compares them with the model as it is; a record without a measurement or without its kernel
file is left alone."""

from __future__ import annotations

import argparse
import json

import pytest

from benchmarks.measured_v5e import read_records, reestimate
from maxkernel_tui.agents.builtin import draft_kernel
from maxkernel_tui.agents.builtin.autotune import estimate_source, reference_cost
from maxkernel_tui.kernels.loader import find_task

pytestmark = pytest.mark.slow  # traces the drafted kernel twice (seconds)


def test_a_measured_record_gets_todays_estimate_of_its_own_file(suite_tasks, tmp_path):
    task = find_task("12p", suite_tasks)
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / f"{task.task_id}.py").write_text(draft_kernel(task).source)
    measured = {
        "task": task.task_id,
        "kernel_ms": 1.633,
        "tolerance_passes": 1,
        "model": {"kernel_ms": 99.0, "family": "row-wise reduction", "verdict": "accepted"},
    }
    unmeasured = {"task": "41k_Gemm_Add_ReLU", "error": "timed out", "model": {"kernel_ms": 8.7}}
    no_file = {"task": "8p_GEMM", "kernel_ms": 20.0, "model": {"kernel_ms": 20.2}}
    out = tmp_path / "measured.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in (measured, unmeasured, no_file)))

    reestimate(argparse.Namespace(kernels=str(kernels), out=str(out), date="2026-12-06"))

    lines = out.read_text().splitlines()
    assert len(lines) == 4  # one record appended, three kept as they were
    records = read_records(out)
    again = records[task.task_id]
    source = (kernels / f"{task.task_id}.py").read_text()
    today = estimate_source(source, task, reference_cost=reference_cost(task))
    assert again["model"]["kernel_ms"] == pytest.approx(today.seconds * 1e3)
    assert again["model"]["kernel_file"] == f"{task.task_id}.py"
    assert again["model"]["reestimated"] == "2026-12-06"
    assert again["model"]["family"] == "row-wise reduction"
    assert again["kernel_ms"] == 1.633  # the measurement is the one recorded
    assert records["41k_Gemm_Add_ReLU"] == unmeasured and records["8p_GEMM"] == no_file
