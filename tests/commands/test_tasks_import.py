"""`maxkernel-tui tasks import` as a user runs it: a JAX function with --args, and one whose file
has its own get_inputs(), become folders that `tasks --path` lists with three configurations;
nothing is overwritten without --force."""

import json
import textwrap

import pytest

from tests.support.cli import cli

# validation and listing run jax worker processes
pytestmark = pytest.mark.slow

FUNCTION = """
    import jax
    import jax.numpy as jnp


    def rms_norm(x, scale, eps):
        r = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)
        return x * r * scale


    def get_inputs(dtype=jnp.float32):
        rows = 4096
        hidden = 1024
        x = jax.random.normal(jax.random.key(0), (rows, hidden), dtype=dtype)
        scale = jax.random.normal(jax.random.key(1), (hidden,), dtype=dtype)
        return [x, scale], [1e-6]
    """


def test_a_function_imported_with_args_and_one_with_get_inputs_list_three_configurations(
    tmp_path,
):
    source = tmp_path / "mine.py"
    source.write_text(textwrap.dedent(FUNCTION))
    tasks = tmp_path / "tasks"
    with_args = cli(
        "tasks",
        "import",
        str(source),
        "--function",
        "rms_norm",
        "--out",
        str(tasks / "from_args"),
        "--args",
        "f32[8,2048,4096] f32[4096]",
        "--static",
        "1e-5",
        cache=tmp_path / "cache",
    )
    assert "wrote" in with_args.stdout and "atol 0.001, rtol 0.001" in with_args.stdout
    own = cli(
        "tasks", "import", str(source), "--out", str(tasks / "own_inputs"), cache=tmp_path / "cache"
    )
    assert "from a jax-function" in own.stdout
    again = cli(
        "tasks",
        "import",
        str(source),
        "--out",
        str(tasks / "own_inputs"),
        check=False,
        cache=tmp_path / "cache",
    )
    assert again.returncode == 2 and "exists: pass --force" in again.stderr
    listed = json.loads(
        cli("tasks", "--path", str(tasks), "--json", "--no-cost", cache=tmp_path / "cache").stdout
    )
    by_id = {record["task_id"]: record for record in listed["tasks"]}
    assert sorted(by_id) == ["from_args", "own_inputs"] and listed["errors"] == []
    for record in by_id.values():
        assert list(record["configs"]) == ["bench", "check", "heldout"]
    x, scale = by_id["from_args"]["configs"]["check"]["inputs"][:2]
    assert x["shape"][-1] == scale["shape"][0]  # the hidden size stays tied to the scale's
    assert x["shape"][0] * x["shape"][1] * x["shape"][2] < 8 * 2048 * 4096  # smaller than bench
    assert by_id["own_inputs"]["configs"]["heldout"]["static"] == [1e-6]
