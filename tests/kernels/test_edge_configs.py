"""Validation of the tester's edge-case configurations: each rule rejects with its reason."""

import pytest

from maxkernel_tui.kernels.edge_configs import (
    param_problems,
    tile_problems,
    validate_edge_configs,
)
from maxkernel_tui.kernels.loader import find_task, load_task

CHECK = {"batch": 2, "seq": 64, "hidden": 512}


@pytest.mark.parametrize(
    "params, reason",
    [
        ({"batch": 2, "seq": 64}, "missing ['hidden']"),
        ({**CHECK, "heads": 4}, "unknown ['heads']"),
        ({**CHECK, "seq": 0}, "seq=0 is not a positive int"),
        ({**CHECK, "seq": 40.0}, "seq=40.0 is not a positive int"),
        ({**CHECK, "batch": True}, "batch=True is not a positive int"),
        ({**CHECK, "hidden": 4096}, "hidden=4096 exceeds 4x the check value 512"),
        (dict(CHECK), "same as the check configuration"),
        ([2, 64, 512], "params must be a mapping"),
    ],
)
def test_parameters_break_a_rule(params, reason):
    assert any(reason in problem for problem in param_problems(params, CHECK))


def test_parameters_within_the_rules():
    assert param_problems({"batch": 3, "seq": 40, "hidden": 384}, CHECK) == []


def test_tpu_tiles_are_kept_where_the_check_shapes_had_them():
    assert (
        tile_problems([(64, 512), (7, 3)], [(40, 384), (5, 1)]) == []
    )  # (7, 3) had no tiles to keep
    (lane,) = tile_problems([(64, 512)], [(64, 500)])
    assert "last dim 500 is not a multiple of 128" in lane
    (sublane,) = tile_problems([(2, 64, 512)], [(2, 41, 512)])
    assert "second-last dim 41 is not a multiple of 8" in sublane
    assert "ranks differ" in tile_problems([(64, 512)], [(64, 512), (1,)])[0]


@pytest.mark.slow  # the reference runs in a jax worker
def test_validation_runs_the_reference_in_a_worker(suite_tasks):
    task = find_task("12p", suite_tasks)
    accepted, rejected = validate_edge_configs(
        task,
        [
            ("edge_rows", {"batch": 2, "seq": 40, "hidden": 512}),
            ("edge_ragged", {"batch": 2, "seq": 41, "hidden": 512}),
            ("edge_big", {"batch": 9, "seq": 64, "hidden": 512}),
            ("heldout", {"batch": 1, "seq": 8, "hidden": 128}),
            ("edge_rows", {"batch": 1, "seq": 8, "hidden": 128}),
            ("../up", {"batch": 1, "seq": 8, "hidden": 128}),
        ],
    )
    assert accepted == [("edge_rows", {"batch": 2, "seq": 40, "hidden": 512})]
    reasons = "\n".join(rejected)
    assert len(rejected) == 5
    assert "edge_ragged: array 0 [2, 41, 512]: second-last dim 41 is not a multiple of 8" in reasons
    assert "edge_big: batch=9 exceeds 4x" in reasons
    assert (
        "heldout: the name is already taken" in reasons
        and "edge_rows: the name is already taken" in reasons
    )
    assert "'../up': the name must be" in reasons


@pytest.mark.slow  # the reference runs in a jax worker
def test_a_slow_reference_is_rejected(suite_tasks):
    task = find_task("12p", suite_tasks)
    accepted, (reason,) = validate_edge_configs(
        task, [("edge_rows", {"batch": 2, "seq": 40, "hidden": 512})], time_limit=0.0
    )
    assert accepted == [] and "over the 0 s limit" in reason


def test_a_task_without_named_configurations_takes_none(tmp_path):
    from tests.support.task_folders import move_inputs_to_yaml, write_plain

    folder = write_plain(tmp_path, "41k_Gemm_Add_ReLU")
    move_inputs_to_yaml(folder)  # its sizes are then not derived
    accepted, (reason,) = validate_edge_configs(load_task(folder), [("edge_small", {"n": 100})])
    assert accepted == [] and "no named configurations" in reason
