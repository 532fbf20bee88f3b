"""The built-in agent on tasks written the way others write them, through the real CLI and
harness (`run --provider builtin`, then `eval` accepts): a matmul + sigmoid + row sum whose
sizes sit in a dict read by subscript, in_features = out_features (MaxKernel's 36k as its
dataset writes it: nothing is derived from a dict today, so numerics run at its production
shapes), and a bf16 SwiGLU imported with `tasks import` (its tolerance raised to what its own
bf16 rounding needs, importers/calibration.py). The GEMM + bias + ReLU with m = n is
test_builtin_plain_tasks.py's, the PyTorch Linear + GroupNorm test_builtin_imported_modules.py's."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support.cli_runs import command, finished, solved_by_builtin, user_env

# Built-in agent sessions through the real harness: minutes each on a 2-core machine.
pytestmark = [pytest.mark.slow, pytest.mark.heavy]

MATMUL_SIGMOID_SUM_DICT = """
    import jax
    import jax.numpy as jnp


    def get_inputs(dtype=jnp.float32):
        config = {'name': 'matmul_sigmoid_sum', 'batch_size': 256, 'in_features': 512,
                  'out_features': 512}
        key = jax.random.key(0)
        k_x, k_w, k_b = jax.random.split(key, 3)
        x = jax.random.uniform(k_x, (config['batch_size'], config['in_features']), dtype=dtype)
        weight = jax.random.normal(
            k_w, (config['in_features'], config['out_features']), dtype=dtype) * 0.02
        bias = jax.random.normal(k_b, config['out_features'], dtype=dtype) * 0.02
        return [x, weight, bias], []


    def computation(x, weight, bias):
        y = jnp.matmul(x, weight) + bias
        return jnp.sum(jax.nn.sigmoid(y), axis=1, keepdims=True)
"""

SWIGLU = """
    import jax
    import jax.numpy as jnp


    def swiglu(x, w_gate, w_up):
        return jax.nn.silu(x @ w_gate) * (x @ w_up)
"""


def test_the_builtin_agent_solves_a_matmul_sigmoid_sum_whose_sizes_sit_in_a_dict(tmp_path):
    folder = tmp_path / "tasks" / "matmul_sigmoid_sum"
    folder.mkdir(parents=True)
    (folder / "kernel_task.yaml").write_text(
        "task_id: matmul_sigmoid_sum\ndescription: Kernel task for matmul_sigmoid_sum\n"
        'input_gen_code: ""\natol: 0.001\nrtol: 0.001\n'
    )
    (folder / "reference.py").write_text(textwrap.dedent(MATMUL_SIGMOID_SUM_DICT).lstrip())
    env = user_env(tmp_path, tmp_path / "cache")
    judged = solved_by_builtin(str(folder), tmp_path / "kernel.py", env)
    assert judged.returncode == 0, judged.stdout[-2000:] + judged.stderr[-2000:]
    assert "verdict: ACCEPTED" in judged.stdout
    source = (tmp_path / "kernel.py").read_text()
    assert "bias.reshape(1, weight_dim1)" in source and "x_dim1" not in source


def test_the_builtin_agent_solves_an_imported_bf16_swiglu(tmp_path: Path) -> None:
    source = tmp_path / "swiglu.py"
    source.write_text(textwrap.dedent(SWIGLU).lstrip())
    task = tmp_path / "tasks" / "swiglu"
    env = user_env(tmp_path, tmp_path / "cache")
    imported = finished(
        command(
            "tasks",
            "import",
            str(source),
            "--out",
            str(task),
            "--args",
            "bf16[256,1024] bf16[1024,512] bf16[1024,512]",  # depth 1024: x @ w ~ N(0, 32^2)
        ),
        env,
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
    assert "tolerance atol 0.05, rtol 0.05: the 16-bit default 0.01 is below" in imported.stdout
    judged = solved_by_builtin(str(task), tmp_path / "kernel.py", env)
    assert judged.returncode == 0, judged.stdout[-2000:] + judged.stderr[-2000:]
    assert "verdict: ACCEPTED" in judged.stdout and "heldout: heldout" in judged.stdout
