"""`maxkernel-tui eval` and `bench` as a user runs them: exit codes, JSON, resume."""

import json
import shutil

import pytest

from tests.support.cli import cli
from tests.support.paths import ADAPTED_TASKS, GRADIENT_TASKS, KERNELS


@pytest.mark.slow  # worker processes: jax, TPU compiles
def test_eval_accepts_an_honest_kernel_with_a_json_report():
    done = cli(
        "eval",
        str(KERNELS / "honest" / "12p_RMSNorm.py"),
        "--task",
        "12p",
        "--json",
        "--seeds",
        "2",
    )
    report = json.loads(done.stdout)
    assert (
        report["verdict"] == "accepted"
        and report["task"] == "12p_RMSNorm"
        and report["targets"] == ["v5e"]
    )
    assert [c["name"] for c in report["checks"]] == [
        "static",
        "sandbox",
        "trace",
        "tpu_lower",
        "tpu_compile",
        "production",
        "numerics",
        "heldout",
        "timing",
    ]
    assert all(
        {"name", "status", "detail", "seconds", "reason"} <= set(c) for c in report["checks"]
    )
    assert report["timings"] == [] and "TPU interpret mode" in report["device"]
    # an acceptance says how fast the model thinks it is against XLA, labelled as an estimate
    assert report["estimate"].startswith("against XLA on TPU v5e: ")
    assert "estimated by the performance model" in report["estimate"]
    # against both XLAs, each labelled
    assert "XLA@1-pass (tolerance) · " in report["estimate"]
    assert "XLA@1-pass (as written) (est., v5e)" in report["estimate"]


@pytest.mark.slow  # worker processes: jax, TPU compiles
def test_eval_rejects_with_exit_1_and_a_readable_reason():
    done = cli(
        "eval", str(KERNELS / "cheats" / "plain_jnp.py"), "--task", "41k_Gemm_Add_ReLU", check=False
    )
    assert done.returncode == 1
    assert "✗ trace        no pallas_call" in done.stdout
    assert done.stdout.strip().endswith(
        "verdict: REJECTED: trace: no pallas_call: the work runs in plain XLA "
        "(jnp), not in a Pallas kernel"
    )


@pytest.mark.slow  # jax worker processes
def test_eval_usage_errors_exit_2(tmp_path):
    missing = cli("eval", str(tmp_path / "nope.py"), "--task", "12p", check=False)
    assert missing.returncode == 2 and "no such kernel file" in missing.stderr
    unknown_task = cli(
        "eval", str(KERNELS / "honest" / "12p_RMSNorm.py"), "--task", "99z", check=False
    )
    assert unknown_task.returncode == 2 and "no task '99z'" in unknown_task.stderr
    unknown_tpu = cli(
        "eval",
        str(KERNELS / "honest" / "12p_RMSNorm.py"),
        "--task",
        "12p",
        "--tpu",
        "v99",
        check=False,
    )
    assert unknown_tpu.returncode == 2 and "libtpu does not know TPU 'v99'" in unknown_tpu.stderr


@pytest.mark.slow  # worker processes: jax, TPU compiles
def test_eval_takes_a_task_folder_path():
    folder = ADAPTED_TASKS / "1_Vector_Add"
    done = cli("eval", str(folder / "reference.py"), "--task", str(folder), "--json", check=False)
    report = json.loads(done.stdout)
    assert report["task"] == "1_Vector_Add" and report["verdict"] == "rejected"
    trace = next(c for c in report["checks"] if c["name"] == "trace")
    assert trace["reason"] == "no_pallas_call" and trace["detail"].startswith("no pallas_call")


@pytest.mark.slow  # worker processes: jax, TPU compiles
def test_bench_sanity_run_resumes(tmp_path):
    results = tmp_path / "results.jsonl"
    first = json.loads(
        cli("bench", "--suite", str(ADAPTED_TASKS), "--json", "--results", str(results)).stdout
    )
    assert first["summary"] == {
        "tasks": 2,
        "correct": 2,
        "timed": 0,
        "fast_p": None,
        "with_expert": 0,
        "match_expert": 0,
    }
    assert len(results.read_text().splitlines()) == 2
    results.write_text(
        results.read_text().splitlines()[0] + "\n"
    )  # as if killed after the first task
    second = json.loads(
        cli("bench", "--suite", str(ADAPTED_TASKS), "--json", "--results", str(results)).stdout
    )
    assert [r["task"] for r in second["results"]] == ["1_Vector_Add", "2_Softmax_Multi"]
    assert len(results.read_text().splitlines()) == 2  # only the missing task was evaluated again


@pytest.mark.slow  # worker processes: jax, TPU compiles
def test_bench_with_kernels_prints_a_table(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    shutil.copy(KERNELS / "honest" / "12p_RMSNorm.py", kernels / "12p.py")
    shutil.copy(KERNELS / "cheats" / "plain_jnp.py", kernels / "41k_Gemm_Add_ReLU.py")
    done = cli(
        "bench", "--kernels", str(kernels), "--results", str(tmp_path / "r.jsonl"), check=False
    )
    assert done.returncode == 1
    assert "✓ 12p_RMSNorm" in done.stdout and "✗ 41k_Gemm_Add_ReLU" in done.stdout
    assert "correct 1/2; fast_p: not available: no timings (no TPU here" in done.stdout


def _row(verdict, timings):
    from maxkernel_tui.commands.bench import BenchRow

    return BenchRow("key", "task", "task.py", verdict, None, "", timings, 1.0)


def _speedup(significant, ratio):
    from maxkernel_tui.kernels.report.checks import Timing

    return Timing(
        "speedup over the XLA reference",
        "measured",
        "TPU v5 lite",
        "",
        ratio=ratio,
        significant=significant,
    )


def test_fast_p_counts_only_correct_and_significantly_faster_tasks():
    from maxkernel_tui.commands.bench import BenchRow, _totals

    win = [_speedup(True, 1.4)]
    noise = [_speedup(False, 1.1)]
    rows = [
        _row("accepted", win),
        _row("accepted", noise),
        _row("rejected", []),
        _row("accepted", win),
    ]
    assert _totals(rows).to_json() == {
        "tasks": 4,
        "correct": 3,
        "timed": 3,
        "fast_p": {"p": 1.0, "fast": 0.5},
        "with_expert": 0,
        "match_expert": 0,
    }
    assert _totals(rows[2:3]).to_json()["fast_p"] is None
    # a results file line reads back as the row it was
    assert BenchRow.from_json(json.loads(json.dumps(rows[0].to_json()))) == rows[0]


@pytest.mark.slow  # worker processes: jax
def test_an_error_message_with_terminal_controls_reaches_the_terminal_as_text():
    """A kernel whose exception writes the clipboard, retitles the window and clears the
    screen: `eval` prints the message with each control character as an escape."""
    done = cli("eval", str(KERNELS / "cheats" / "hostile_message.py"), "--task", "12p", check=False)
    assert done.returncode == 1
    for stream in (done.stdout, done.stderr):
        assert not set(stream) & {"\x1b", "\x07", "\x08", "\x9b", "\u202e"}, stream
    assert "ValueError: \\x1b]52;c;cm0gLXJmIH4K\\x07\\x1b]0;owned\\x07" in done.stdout
    # stopped at trace: its evidence names no seed that was never drawn
    assert "evidence: numerics: not run (stopped at trace)" in done.stdout
    assert "fresh seed" not in done.stdout


def test_eval_refuses_gradients_of_a_name_computation_does_not_take():
    done = cli(
        "eval",
        str(KERNELS / "gradients" / "rmsnorm_vjp.py"),
        "--task",
        str(GRADIENT_TASKS / "rmsnorm_train"),
        "--gradients",
        "x,q",
        check=False,
    )
    assert done.returncode == 2
    assert (
        "--gradients" in done.stderr and "['q']" in done.stderr and "(x, w, epsilon)" in done.stderr
    )
