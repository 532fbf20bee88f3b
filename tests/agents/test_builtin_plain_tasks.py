"""The built-in agent on plain tasks, through the real CLI and harness: `run --provider builtin`
writes a kernel that `eval` accepts on a plain RMSNorm; a beam search writes a kernel that `eval`
accepts on a plain GEMM+bias+ReLU (whose M and N coincide at production sizes); an imported
function is solved too. Kept to one iteration, no autotuning: these are end-to-end
tests of plain tasks, not of the agent's tuning."""

import subprocess
import textwrap

import pytest

from tests.support.cli_runs import command, finished, solved_by_builtin, user_env
from tests.support.task_folders import write_plain

# Built-in agent sessions through the real harness: several minutes each on a 2-core machine.
pytestmark = [pytest.mark.slow, pytest.mark.heavy]


def _cli(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    return finished(command(*args), user_env(tmp_path, tmp_path / "cache"), timeout=1200)


def _solve(tmp_path, task: str, name: str, derived: bool = True) -> None:
    """`derived`: the task's check/heldout are derived at load (plain), not declared (ours)."""
    judged = solved_by_builtin(
        task, tmp_path / f"{name}.py", user_env(tmp_path, tmp_path / "cache")
    )
    assert judged.returncode == 0, judged.stdout[-2000:] + judged.stderr[-2000:]
    assert "verdict: ACCEPTED" in judged.stdout and "heldout: heldout" in judged.stdout
    assert ("numerics: check, derived" in judged.stdout) is derived


def test_the_builtin_agent_solves_a_plain_rmsnorm(tmp_path):
    # a plain GEMM: the beam search below writes and `eval` accepts its kernel
    _solve(tmp_path, str(write_plain(tmp_path / "tasks", "12p_RMSNorm")), "rmsnorm")


def test_a_beam_search_with_the_builtin_provider_writes_an_accepted_kernel(tmp_path):
    task = write_plain(tmp_path / "tasks", "41k_Gemm_Add_ReLU")
    out = tmp_path / "best.py"
    search = _cli(
        tmp_path,
        "search",
        "--task",
        str(task),
        "--algorithm",
        "beam",
        "--provider",
        "builtin",
        "--width",
        "1",
        "--depth",
        "1",
        "--branches",
        "1",
        "--max-evals",
        "3",
        "--out",
        str(out),
    )
    assert search.returncode == 0, search.stdout[-2000:] + search.stderr[-2000:]
    judged = _cli(tmp_path, "eval", str(out), "--task", str(task), "--seeds", "1")
    assert judged.returncode == 0, judged.stdout[-2000:]
    assert "verdict: ACCEPTED" in judged.stdout and "numerics: check, derived" in judged.stdout


def test_the_builtin_agent_solves_an_imported_function(tmp_path):
    source = tmp_path / "mine.py"
    source.write_text(
        textwrap.dedent(
            """
            import jax
            import jax.numpy as jnp


            def gemm_relu(x, w, b):
                return jax.nn.relu(x @ w + b)
            """
        )
    )
    task = tmp_path / "tasks" / "imported_gemm"
    imported = _cli(
        tmp_path,
        "tasks",
        "import",
        str(source),
        "--out",
        str(task),
        "--args",
        "f32[256,512] f32[512,256] f32[256]",
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
    _solve(tmp_path, str(task), "imported", derived=False)  # written in our format
