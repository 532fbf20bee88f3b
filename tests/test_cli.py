"""The `maxkernel-tui` command line, run as a user runs it (a subprocess, the installed script)."""

import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from maxkernel_tui import __version__
from tests.support.cli import cli
from tests.support.kernels import JAXBENCH_IDS, TRAINING_IDS
from tests.support.paths import ADAPTED_TASKS


def test_version_from_the_installed_console_script():
    script = pathlib.Path(sys.executable).with_name("maxkernel-tui")  # beside the venv's python
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"maxkernel-tui {__version__}"
    assert cli("--version").stdout.strip() == f"maxkernel-tui {__version__}"


@pytest.mark.parametrize("args", [(), ("tasks",), ("tasks", "show")])
def test_help_on_every_command(args):
    out = cli(*args, "--help").stdout
    assert out.startswith("usage: maxkernel-tui")
    assert "--path" in out or not args


@pytest.mark.slow  # worker processes: jax, TPU compiles
def test_tasks_json_lists_all_50_then_the_training_group(suite_descriptions, suite_cache):
    listing = json.loads(cli("tasks", "--json", cache=suite_cache).stdout)
    assert listing["errors"] == []
    assert [t["task_id"] for t in listing["tasks"]] == JAXBENCH_IDS + TRAINING_IDS
    training = [t for t in listing["tasks"] if t["task_id"] in TRAINING_IDS]
    assert all(t["category"] == "training" and t["gradients"] for t in training)
    assert not any("gradients" in t for t in listing["tasks"] if t["task_id"] in JAXBENCH_IDS)
    gemm = next(t for t in listing["tasks"] if t["task_id"] == "8p_GEMM")
    assert gemm["category"] == "gemm" and gemm["tolerances"]["check"] == {
        "atol": 0.01,
        "rtol": 0.01,
    }
    assert gemm["configs"]["bench"]["outputs"] == [{"shape": [8192, 28672], "dtype": "bfloat16"}]
    assert gemm["cost"]["kind"] == "estimated"
    assert gemm["cost"]["source"].startswith(
        "estimated: XLA cost analysis, ahead-of-time compile for TPU v5e"
    )


@pytest.mark.slow  # worker processes: jax, TPU compiles
def test_tasks_text_names_the_generation_and_says_estimated(suite_descriptions, suite_cache):
    text = cli("tasks", cache=suite_cache).stdout
    assert "12p_RMSNorm  [norm]" in text
    assert "  check    bf16[2,64,512] bf16[512]  static (1e-05,) -> bf16[2,64,512]" in text
    assert text.count("(estimated: XLA cost analysis") == len(JAXBENCH_IDS + TRAINING_IDS)
    assert "training tasks (forward and backward judged):\n1t_RMSNorm_Training  [training]" in text
    assert "  gradients judged: x, scale (forward and backward)" in text


@pytest.mark.slow  # worker processes: jax, TPU compiles
def test_tasks_path_reads_a_folder_in_the_adapted_format(tmp_path):
    listing = json.loads(
        cli("tasks", "--json", "--path", str(ADAPTED_TASKS), cache=tmp_path).stdout
    )
    ids = [t["task_id"] for t in listing["tasks"]]
    assert ids == ["1_Vector_Add", "2_Softmax_Multi"]
    assert list(listing["tasks"][1]["configs"]) == ["bench.0", "bench.1"]
    assert listing["tasks"][0]["cost"]["flops"] == 8192


@pytest.mark.slow  # describe workers
def test_tasks_path_reports_bad_tasks_and_lists_the_rest(tmp_path):
    root = tmp_path / "tasks"
    shutil.copytree(ADAPTED_TASKS, root)
    (root / "1_Vector_Add" / "kernel_task.yaml").write_text("task_id: [broken\n")
    done = cli("tasks", "--no-cost", "--path", str(root), cache=tmp_path / "cache", check=False)
    assert done.returncode == 1
    assert "2_Softmax_Multi" in done.stdout
    assert f"{root / '1_Vector_Add' / 'kernel_task.yaml'}: invalid YAML at line" in done.stderr


def test_tasks_show_prints_the_reference():
    out = cli("tasks", "show", "12p").stdout
    assert out.startswith("# 12p_RMSNorm  [norm]")
    assert "def computation(x, scale, epsilon):" in out


def test_tasks_show_unknown_id_is_a_clear_error():
    done = cli("tasks", "show", "99z_Nothing", check=False)
    assert done.returncode == 2 and "no task '99z_Nothing'" in done.stderr


def test_tasks_path_that_does_not_exist(tmp_path):
    done = cli("tasks", "--path", str(tmp_path / "nope"), check=False)
    assert done.returncode == 2 and "no such directory of tasks" in done.stderr
