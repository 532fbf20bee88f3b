"""MaxKernel's 36k case, read in place: a GEMM + bias + ReLU whose input width equals its output
width in production (x.shape[1] == w.shape[1] == 512). A kernel that reshapes the bias by the
wrong one of the two (`b.reshape(1, x.shape[1])`) is exact at production and at check (both
sizes doubled alike), so only a held-out configuration where they differ can catch it: `eval`
on the never-described folder traces the reference, holds them apart, and rejects it at heldout;
the honest kernel is accepted there."""

import json
import textwrap

import pytest

from maxkernel_tui.kernels.config_names import CHECK, HELDOUT
from maxkernel_tui.kernels.loader import load_task
from tests.support.cli import cli
from tests.support.plain_kernels import HONEST_GEMM

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # two `eval`s with a describe: minutes here

REFERENCE = """
import jax
import jax.numpy as jnp


def get_inputs(dtype=jnp.float32):
    batch_size = 256
    in_features = 512
    out_features = 512
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(k1, (batch_size, in_features), dtype=dtype)
    w = jax.random.normal(k2, (in_features, out_features), dtype=dtype) * 0.05
    b = jax.random.normal(k3, (out_features,), dtype=dtype)
    return [x, w, b], []


def computation(x, w, b):
    return jax.nn.relu(x @ w + b)
"""

# the bias reshaped by the input's width (`depth` is x.shape[1]) where the output's was meant
WRONG_WIDTH = HONEST_GEMM.replace("b.reshape(1, n)", "b.reshape(1, depth)")
assert WRONG_WIDTH != HONEST_GEMM


def _eval(kernel, folder, cache):
    done = cli(
        "eval",
        str(kernel),
        "--task",
        str(folder),
        "--json",
        "--seeds",
        "1",
        cache=cache,
        check=False,
    )
    return json.loads(done.stdout) if done.stdout.strip() else {"stderr": done.stderr}


def test_a_kernel_using_the_wrong_one_of_two_coinciding_sizes_is_rejected_at_heldout(tmp_path):
    folder = tmp_path / "36k_Gemm_Bias_ReLU"
    folder.mkdir()
    (folder / "kernel_task.yaml").write_text(
        "task_id: 36k_Gemm_Bias_ReLU\ndescription: GEMM, bias, ReLU\n"
        'input_gen_code: ""\natol: 0.01\nrtol: 0.01\n'
    )
    (folder / "reference.py").write_text(textwrap.dedent(REFERENCE).lstrip())
    static = load_task(folder, traced_ties=False).derivation.sizes
    # without tracing, the two widths coincide at every configuration: the attack would pass
    assert all(static[c]["in_features"] == static[c]["out_features"] for c in (CHECK, HELDOUT))
    wrong, honest = tmp_path / "wrong_width.py", tmp_path / "honest.py"
    wrong.write_text(WRONG_WIDTH)
    honest.write_text(HONEST_GEMM)
    cache = tmp_path / "cache"

    rejected = _eval(wrong, folder, cache)  # the folder was never described: eval traces it
    assert rejected.get("verdict") == "rejected", rejected
    failed = [c for c in rejected["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in failed] == ["heldout"], failed
    assert {"numerics": "pass"}.items() <= {
        c["name"]: c["status"] for c in rejected["checks"]
    }.items()

    accepted = _eval(honest, folder, cache)
    assert accepted.get("verdict") == "accepted", accepted
