"""Sizes bound by where they flow in the reference, never by their values: the rules on their
own, then plain task folders (MaxKernel's styles) whose sizes coincide at every configuration."""

from __future__ import annotations

import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

from maxkernel_tui.agents.builtin import draft_kernel, plan_task
from maxkernel_tui.agents.builtin.dataflow import SizeFlow, flow_equation, flow_plain_conv
from maxkernel_tui.agents.builtin.dims import Dim, DimTable
from maxkernel_tui.agents.builtin.program import trace_program
from maxkernel_tui.kernels.config_names import CHECK
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import Task

_YAML = 'task_id: {name}\ndescription: Kernel task for {name}\ninput_gen_code: ""\natol: 0.001\n'
_YAML += "rtol: 0.001\n"


def _dot(flow: SizeFlow, lhs, rhs, out) -> None:
    flow_equation(
        flow, "dot_general", {"dimension_numbers": (((1,), (0,)), ((), ()))}, [lhs, rhs], [out]
    )


def test_sizes_of_equal_value_stay_apart_unless_an_equation_ties_them():
    flow = SizeFlow()
    x = flow.input_nodes((256, 512), (256, 512), position=0)
    w = flow.input_nodes((512, 256), (512, 256), position=1)
    b = flow.input_nodes((256,), (256,), position=2)
    product, widened = flow.nodes((256, 256), (256, 256)), flow.nodes((256, 256), (256, 256))
    _dot(flow, x, w, product)
    flow_equation(flow, "broadcast_in_dim", {"broadcast_dimensions": (1,)}, [b], [widened])
    flow_equation(flow, "add", {}, [product, widened], [flow.nodes((256, 256), (256, 256))])
    resolve = flow.resolver(DimTable())
    rows, cols = resolve.dim(product[0]), resolve.dim(product[1])
    assert rows == resolve.dim(x[0]) and cols == resolve.dim(w[1]) == resolve.dim(b[0])
    assert rows != cols  # 256 both, but the rows are x's and the columns w's
    assert resolve.dim(x[1]) == resolve.dim(w[0])  # contracted: one size


def test_bound_by_value_equal_input_sizes_are_one_size():
    flow = SizeFlow(tie_equal_inputs=True)
    x = flow.input_nodes((256, 512), (256, 512), position=0)
    w = flow.input_nodes((512, 256), (512, 256), position=1)
    resolve = flow.resolver(DimTable())
    assert resolve.dim(x[0]) == resolve.dim(w[1])


def test_a_reshape_merges_into_a_product_and_a_split_merged_back_is_its_source():
    flow = SizeFlow()
    x = flow.input_nodes((4, 1024, 768), (2, 64, 768), position=0)
    rows = flow.nodes((4096, 768), (128, 768))
    flow_equation(flow, "reshape", {}, [x], [rows])
    groups = flow.nodes((4096, 8, 96), (128, 8, 96))  # a group norm's view
    flow_equation(flow, "reshape", {}, [rows], [groups])
    back = flow.nodes((4096, 768), (128, 768))
    flow_equation(flow, "reshape", {}, [groups], [back])
    resolve = flow.resolver(DimTable())
    batch, seq, features = (resolve.dim(n) for n in x)
    assert resolve.dim(rows[0]) == batch * seq
    # Neither part of the 768 features varies: the last (the width) follows the features.
    assert resolve.dim(groups[1]) == Dim.const(8)
    assert resolve.dim(groups[2]) == features * Dim(Fraction(1, 8))
    assert resolve.dim(back[1]) == features


def test_a_valid_convolution_output_is_its_input_less_the_taps():
    flow = SizeFlow()
    image = flow.input_nodes((8, 3, 128, 128), (2, 3, 32, 128), position=0)
    kernel = flow.input_nodes((128, 3, 3, 3), (32, 3, 3, 3), position=1)
    out = flow.nodes((8, 128, 126, 126), (2, 32, 30, 126))
    flow_plain_conv(flow, image, kernel, out)
    table = DimTable()
    resolve = flow.resolver(table)
    assert resolve.dim(out[1]) == resolve.dim(kernel[0]) != resolve.dim(image[2])
    height = resolve.dim(out[2])
    assert table.shifts[height.symbols[0]] == (resolve.dim(image[2]).symbols[0], -2)


def _folder(root: Path, name: str, reference: str) -> Task:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "kernel_task.yaml").write_text(_YAML.format(name=name))
    (folder / "reference.py").write_text(textwrap.dedent(reference).lstrip())
    return load_task(folder)


# A GEMM + bias + ReLU with m = n = 256, sizes as named integers: the derived check keeps m = n.
GEMM_NAMED = """
    import jax
    import jax.numpy as jnp


    def get_inputs(dtype=jnp.float32):
        m = 256
        k = 512
        n = 256
        k1, k2 = jax.random.split(jax.random.key(0))
        x = jax.random.normal(k1, (m, k), dtype=dtype)
        w = jax.random.normal(k2, (k, n), dtype=dtype) * 0.05
        b = jax.random.normal(jax.random.key(7), (n,), dtype=dtype)
        return [x, w, b], []


    def computation(x, w, b):
        return jax.nn.relu(x @ w + b)
"""

# The same with every size 256, in a dict read by subscript: no check is derived, so the
# reference is traced at one configuration and nothing but the dataflow tells the sizes apart.
GEMM_DICT = """
    import jax
    import jax.numpy as jnp


    def get_inputs(dtype=jnp.float32):
        config = {'name': 'gemm', 'm': 256, 'k': 256, 'n': 256}
        k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
        x = jax.random.normal(k1, (config['m'], config['k']), dtype=dtype)
        w = jax.random.normal(k2, (config['k'], config['n']), dtype=dtype) * 0.05
        b = jax.random.normal(k3, config['n'], dtype=dtype)
        return [x, w, b], []


    def computation(x, w, b):
        return jax.nn.relu(jnp.matmul(x, w) + b)
"""

# MaxKernel's 36k as its dataset writes it: sizes in a dict, in_features = out_features.
MATMUL_SIGMOID_SUM_DICT = """
    import jax
    import jax.numpy as jnp


    def get_inputs(dtype=jnp.float32):
        config = {'batch_size': 256, 'in_features': 512, 'out_features': 512}
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

# A GEMM and a mean over its columns, m = n: the mean's divisor is n, a constant of the jaxpr
# that only values can place; the probe traces the reference where m and n differ.
GEMM_ROW_MEAN = GEMM_NAMED.replace(
    "return jax.nn.relu(x @ w + b)", "return jnp.mean(jax.nn.relu(x @ w + b), axis=1)"
)


# The agent traces the reference and runs it to choose its precision: seconds per task.
@pytest.mark.slow
@pytest.mark.parametrize("style", [GEMM_NAMED, GEMM_DICT], ids=["named", "dict"])
def test_a_gemm_whose_rows_and_columns_coincide_is_planned_with_the_bias_on_the_columns(
    tmp_path, style
):
    task = _folder(tmp_path, "gemm_m_equals_n", style)
    assert plan_task(task)[0].family == "matmul + element-wise epilogue"
    source = draft_kernel(task, tune=False).source
    assert "b.reshape(1, w_dim1)" in source and "x_dim0" not in source


@pytest.mark.slow
def test_the_bias_of_matmul_sigmoid_sum_is_read_from_the_weight_not_the_input(tmp_path):
    task = _folder(tmp_path, "matmul_sigmoid_sum", MATMUL_SIGMOID_SUM_DICT)
    assert task.derived  # sizes in a dict are derived too: check and heldout
    source = draft_kernel(task, tune=False).source
    assert "bias.reshape(1, weight_dim1)" in source and "x_dim1" not in source


@pytest.mark.slow
def test_the_probe_traces_the_reference_where_coinciding_sizes_differ(tmp_path):
    task = _folder(tmp_path, "gemm_row_mean", GEMM_ROW_MEAN)
    assert CHECK in task.configs
    program = trace_program(task)
    rows, cols = (program.inputs[0].shape[0], program.inputs[1].shape[1])
    values = program.dims.symbols()
    assert values[rows.symbols[0]][0] == values[cols.symbols[0]][0] == 256
    assert values[rows.symbols[0]][1] != values[cols.symbols[0]][1]  # told apart at the probe
    assert "/ float(w_dim1)" in draft_kernel(task, tune=False).source  # n, never m
