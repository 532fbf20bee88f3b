"""Tracing the reference tells which equal sizes it ties: a GEMM's m and n (both 256) are free of
each other while the two 512s meet in the contraction, and `tasks import` then holds out sizes
where m and n differ; equal sizes written under two names in a plain task are found tied
(described in this process: the test imports jax)."""

import textwrap

import pytest

from maxkernel_tui.kernels import describe
from maxkernel_tui.kernels.config_names import CHECK, HELDOUT
from maxkernel_tui.kernels.importers import ImportOptions
from maxkernel_tui.kernels.importers.service import import_task
from maxkernel_tui.kernels.loader import load_task

pytestmark = pytest.mark.slow  # jax workers: two imports and a describe, about 30 s here

GEMM = """
import jax


def gemm_bias_relu(x, w, b):
    return jax.nn.relu(x @ w + b)
"""

# the contraction's two sides under two names, and a batch of the same value
TWO_NAMES = """
import jax
import jax.numpy as jnp


def get_inputs(dtype=jnp.float32):
    batch = 4096
    d_in = 4096
    w_rows = 4096
    d_out = 1024
    x = jax.random.normal(jax.random.key(0), (batch, d_in), dtype=dtype)
    w = jax.random.normal(jax.random.key(1), (w_rows, d_out), dtype=dtype)
    return [x, w], []


def computation(x, w):
    return x @ w
"""


def test_an_imported_gemm_with_m_equal_to_n_holds_out_m_and_n_apart(tmp_path):
    source = tmp_path / "gemm.py"
    source.write_text(GEMM)
    options = ImportOptions(args="f32[256,512] f32[512,256] f32[256]")
    imported = import_task(source, tmp_path / "task", options)
    groups = sorted(sorted(g) for g in imported.description.tie_groups)
    assert groups == [["x0_0"], ["x0_1", "x1_0"], ["x1_1", "x2_0"]]
    configs = {c: imported.description.configs[c] for c in (CHECK, HELDOUT)}
    x, w, b = (spec.shape for spec in configs[HELDOUT].inputs)
    assert x[0] != w[1] and x[1] == w[0] and w[1] == b[0]  # m apart from n, k tied
    assert load_task(imported.folder).configs == ("bench", CHECK, HELDOUT)


def test_equal_sizes_under_two_names_are_found_tied_by_the_contraction(tmp_path):
    folder = tmp_path / "tasks" / "two_names"
    folder.mkdir(parents=True)
    (folder / "kernel_task.yaml").write_text(
        'task_id: two_names\ndescription: d\ninput_gen_code: ""\natol: 0.01\nrtol: 0.01\n'
    )
    (folder / "reference.py").write_text(textwrap.dedent(TWO_NAMES).lstrip())
    described = describe.describe_folder(folder, with_cost=False, with_ties=True)
    groups = sorted(sorted(g) for g in described.tie_groups)
    assert groups == [["batch"], ["d_in", "w_rows"]]
