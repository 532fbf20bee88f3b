"""`maxkernel-tui run --provider builtin` end to end, as a user runs it with no API key and no
network: the kernel it writes is accepted by `eval`, for a task of a known family that is not in
the suite (suite tasks: test_generated_kernels.py and benchmarks/builtin_agent_coverage.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from maxkernel_tui.agents.builtin import draft_kernel
from maxkernel_tui.kernels.loader import builtin_training_dir, find_task, load_tasks
from tests.support.cli_runs import builtin_run, command, finished, user_env

OUR_TASKS = Path(__file__).parent / "tasks"
# the CLI, the agent's jax worker and the real harness (the heavy tier)
pytestmark = [pytest.mark.slow, pytest.mark.heavy]


def test_run_with_the_builtin_agent_writes_a_kernel_that_eval_accepts(
    tmp_path: Path, suite_cache: Path
) -> None:
    task = str(
        OUR_TASKS / "gemm_hardswish_layernorm"
    )  # a task the agent has never seen, as a folder
    env = user_env(tmp_path, suite_cache)
    out = tmp_path / "kernel.py"
    run = builtin_run(task, out, env)
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    assert "provider builtin" in run.stdout and "evaluation of v1: ACCEPTED" in run.stdout
    accepted = finished(command("eval", str(out), "--task", task, "--seeds", "1"), env, 600)
    assert accepted.returncode == 0, accepted.stdout[-3000:]


def test_auto_on_1p_ends_with_an_accepted_kernel_right_at_the_testers_head_dimension(
    tmp_path: Path, suite_cache: Path
) -> None:
    """The flagship task: the tester's edge cases include a head dimension of 384 (three times
    the check's 128), where a scale written as the constant 1/sqrt(128) failed them all."""
    env = user_env(tmp_path, suite_cache)
    out = tmp_path / "kernel.py"
    run = builtin_run("1p", out, env)
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    assert "edge_head_dim_384" in run.stdout and "✓ edge" in run.stdout
    assert "best kernel v1" in run.stdout and out.is_file()


def test_the_builtin_agent_solves_the_training_rmsnorm_verified_at_production_shapes(
    tmp_path: Path, suite_cache: Path
) -> None:
    """1t (RMSNorm with its backward): the written kernel's gradients are judged at check and
    heldout and on sampled tiles of its backward kernels at production shapes, and its estimate
    is against XLA's gradient (jax.vjp of the reference). dscale sums every row block beside
    dx's blocks: the steps that keep it resident are one visit the sample runs whole, so dscale
    is decided at production too (it was left at small shapes when every step was its own
    visit), and its bf16 rounding is kept in interpret mode as on a TPU."""
    # production tiles on for `eval`, as a user has them (the test tier turns them off by
    # default); the session's own evaluation runs without them: the same tiles twice cost a
    # minute of the suite
    env = dict(user_env(tmp_path, suite_cache), MAXKERNEL_TUI_TILE_BLOCKS="4")
    out = tmp_path / "kernel.py"
    run = builtin_run("1t", out, dict(env, MAXKERNEL_TUI_TILE_BLOCKS="off"))
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    assert "evaluation of v1: ACCEPTED" in run.stdout and "gradient of x" in run.stdout
    judged = finished(command("eval", str(out), "--task", "1t", "--seeds", "1"), env, 600)
    assert judged.returncode == 0, judged.stdout[-3000:]
    lines = judged.stdout.splitlines()
    assert "verdict: ACCEPTED, verified at production shapes" in lines, judged.stdout[-4000:]
    assert any(
        "gradients of x, scale verified at production shapes on sampled tiles" in line
        for line in lines
    ), judged.stdout[-3000:]
    backward_tiles = [line for line in lines if "✓ tiles" in line and "backward (gradients" in line]
    assert len(backward_tiles) == 1, judged.stdout[-3000:]
    assert any(
        "estimate:" in line and "against XLA's jax.vjp of the reference" in line for line in lines
    )


def test_the_cross_entropy_training_kernels_mean_loss_is_verified_on_the_whole_forward_grid(
    tmp_path: Path, suite_cache: Path
) -> None:
    """3t: XLA takes the mean of every row's loss the forward kernel gives, so no sample of row
    blocks decides it; the tiles run the forward's whole grid (every row block over every
    vocabulary block) and compare the mean, and the backward's dlogits on sampled tiles."""
    task = find_task("3t", load_tasks(builtin_training_dir())[0])
    kernel = tmp_path / "kernel.py"
    kernel.write_text(draft_kernel(task, tune=False).source)
    env = dict(user_env(tmp_path, suite_cache), MAXKERNEL_TUI_TILE_BLOCKS="4")
    judged = finished(command("eval", str(kernel), "--task", "3t", "--seeds", "1"), env, 600)
    assert judged.returncode == 0, judged.stdout[-3000:]
    lines = judged.stdout.splitlines()
    assert "verdict: ACCEPTED, verified at production shapes" in lines, judged.stdout[-4000:]
    forward = [line for line in lines if line.startswith("  evidence: production tiles (pass)")]
    assert len(forward) == 1, judged.stdout[-3000:]
    blocks = re.search(r"\(pass\): (\d+) of (\d+) output blocks", forward[0])
    assert blocks is not None, forward[0]
    assert blocks[1] == blocks[2] != "1", forward[0]  # every row block of the forward ran
