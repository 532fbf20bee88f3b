"""Task descriptions as data and as text, from stubbed descriptions (no worker, no jax)."""

import json

from maxkernel_tui.kernels.description import (
    ConfigShapes,
    DidNotFit,
    TaskDescription,
    TensorSpec,
    XlaCost,
)
from maxkernel_tui.kernels.listing import format_task, task_record
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task

# What the describe worker answered for 12p_RMSNorm (and what the catalog cached) before types.
STORED = {
    "folder": "/suite/12p_RMSNorm",
    "format": 1,
    "task_id": "12p_RMSNorm",
    "configs": {
        "bench": {
            "inputs": [
                {"shape": [8, 4096, 8192], "dtype": "bfloat16"},
                {"shape": [8192], "dtype": "bfloat16"},
            ],
            "static": [1e-05],
            "outputs": [{"shape": [8, 4096, 8192], "dtype": "bfloat16"}],
        },
    },
    "cost": {
        "config": "bench",
        "target": "v6e",
        "compile_seconds": 1.5,
        "flops": 2.5e9,
        "bytes_accessed": 1.1e9,
        "optimal_seconds": 0.0012,
        "did_not_fit": [{"target": "v5e", "reason": "exceeds available HBM"}],
        "libtpu": "0.0.1",
        "transcendentals": 2.6e8,
    },
}


def _task():
    return load_task(builtin_suite_dir() / "12p_RMSNorm")


def test_a_stored_description_reads_back_and_writes_the_same_json():
    described = TaskDescription.from_json(STORED)
    assert described.configs["bench"].inputs[1] == TensorSpec([8192], "bfloat16")
    assert described.cost.did_not_fit == [DidNotFit("v5e", "exceeds available HBM")]
    assert described.cacheable and described.to_json() == STORED
    assert TaskDescription.from_json(json.loads(json.dumps(described.to_json()))) == described


def test_failures_are_errors_and_are_not_cached():
    worker_died = TaskDescription.from_json({"error": "worker died (killed by SIGSEGV)"})
    assert worker_died.error and not worker_died.cacheable and worker_died.configs == {}
    no_cost = TaskDescription(cost=XlaCost(error="TPU compile failed: boom"))
    assert not no_cost.cacheable and no_cost.to_json()["cost"] == {
        "error": "TPU compile failed: boom"
    }


def test_text_listing_names_shapes_and_the_cost_with_its_provenance():
    text = format_task(_task(), TaskDescription.from_json(STORED))
    assert text.startswith("12p_RMSNorm  [norm]")
    assert "  bench  bf16[8,4096,8192] bf16[8192]  static (1e-05,) -> bf16[8,4096,8192]" in text
    assert "XLA cost on v6e: 2.50 GFLOP, 1.10 GB accessed, roofline 1.200 ms" in text
    assert "(estimated: XLA cost analysis, ahead-of-time compile for TPU v6e, libtpu 0.0.1" in text
    assert text.endswith("; does not fit v5e)")


def test_json_record_labels_the_cost_estimated_and_keeps_errors():
    task = _task()
    record = task_record(task, TaskDescription.from_json(STORED))
    declared = {name: dict(c, derived=False) for name, c in STORED["configs"].items()}
    assert record["configs"] == declared and record["cost"]["kind"] == "estimated"
    assert record["cost"]["source"].startswith("estimated: XLA cost analysis")
    failed = task_record(task, TaskDescription(error="no reference"))
    assert failed["error"] == "no reference" and "configs" not in failed
    assert format_task(task, TaskDescription(error="no reference")).endswith("error: no reference")
    shapes_only = TaskDescription(configs={"bench": ConfigShapes([], [], [])})
    assert "cost" not in task_record(task, shapes_only)


def test_a_validated_configuration_shows_its_reference_and_input_times_as_measured():
    spec = TensorSpec([128, 256], "float32")
    timed = ConfigShapes([spec], [], [spec], reference_seconds=0.12, inputs_seconds=3.0)
    described = TaskDescription(configs={"bench": ConfigShapes([spec], [], [spec]), "check": timed})
    text = format_task(_task(), described)
    shown = "(validated: reference 0.12 s here, compile included, its inputs 3.00 s; measured)"
    assert shown in text
    assert TaskDescription.from_json(described.to_json()).configs["check"] == timed
