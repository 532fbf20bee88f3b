"""The built-in agent on imported PyTorch modules, through the real CLI: `tasks import` of a
KernelBench-style GEMM+ReLU+divide (under `-m coverage`), of a Linear + GroupNorm whose derived
check makes in_features = out_features, and of a Llama-style RMSNorm (over the last dim, with a
scale), then `run --provider builtin`, then `eval` accepts the kernel on the derived check and
held-out shapes. (KernelBench's own RMSNorm over the channels of a 16x64x256x256 activation is
out of the agent's reach: README, "Porting PyTorch, CUDA and Triton sources".)"""

from pathlib import Path

import pytest

from tests.support.cli_runs import command, finished, solved_by_builtin, user_env
from tests.support.paths import KERNELBENCH

# A built-in agent session each through the real harness: a minute or more on a 2-core machine.
pytestmark = [pytest.mark.slow, pytest.mark.heavy]


@pytest.mark.parametrize(
    "module",
    [
        # a GEMM epilogue: the family every other agent test covers, so under `-m coverage`
        pytest.param("gemm_relu_divide", marks=pytest.mark.coverage),
        "linear_groupnorm",
        "rms_norm_last_dim",
    ],
)
def test_the_builtin_agent_solves_an_imported_module(tmp_path: Path, module: str) -> None:
    env = user_env(tmp_path, tmp_path / "cache")
    task = tmp_path / "tasks" / module
    imported = finished(
        command("tasks", "import", str(KERNELBENCH / f"{module}.py"), "--out", str(task)), env
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
    assert "(from a pytorch-module)" in imported.stdout
    judged = solved_by_builtin(str(task), tmp_path / f"{module}_kernel.py", env)
    assert judged.returncode == 0, judged.stdout[-2000:] + judged.stderr[-2000:]
    assert "verdict: ACCEPTED" in judged.stdout, module
    assert "numerics: check on 1 fresh seed" in judged.stdout, module
    assert "heldout: heldout on 1 fresh seed" in judged.stdout, module
