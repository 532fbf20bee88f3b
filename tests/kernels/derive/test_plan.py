"""Derived configurations of task folders in MaxKernel's plain style and JAXBench's native style,
read statically (no jax): each family gets check and heldout, or a stated reason."""

import ast

import pytest

from maxkernel_tui.kernels.config_names import BENCH, CHECK, HELDOUT
from maxkernel_tui.kernels.derive.render import our_format
from maxkernel_tui.kernels.derive.rewrite import builder_source
from maxkernel_tui.kernels.derive.sites import find_sites
from maxkernel_tui.kernels.loader import load_task, load_tasks
from tests.support.task_folders import PLAIN, move_inputs_to_yaml, write_jaxbench, write_plain


@pytest.mark.parametrize("task_id", sorted(PLAIN))
def test_every_plain_family_gets_check_and_heldout_marked_derived(tmp_path, task_id):
    task = load_task(write_plain(tmp_path, task_id))
    assert task.configs == (BENCH, CHECK, HELDOUT) and task.derived and task.named_configs
    sizes = task.derivation.sizes
    assert sizes[CHECK] != sizes[BENCH] and sizes[HELDOUT] != sizes[CHECK]
    assert task.tolerance(CHECK) == task.tolerance(BENCH) == task.tolerance(HELDOUT)
    assert task.source_format == "plain" and task.derivation.keys >= 1


def test_the_paged_layout_keeps_pages_times_page_size_equal_to_the_context(tmp_path):
    task = load_task(write_plain(tmp_path, "6p_Paged_Gather"))
    for config in (CHECK, HELDOUT):
        s = task.derivation.sizes[config]
        assert s["num_pages"] * s["page_size"] == s["context"]
    assert task.derivation.ties == ("context = num_pages x page_size",)


def test_a_chained_assignment_derives_both_sizes_alike(tmp_path):
    task = load_task(write_plain(tmp_path, "18k_Conv2D_ReLU"))
    check = task.derivation.sizes[CHECK]
    assert check["height"] == check["width"] == 64 and check["kernel_size"] == 3


def test_a_jaxbench_folder_loads_as_it_is_with_its_expert_and_conventions(tmp_path):
    folder = write_jaxbench(tmp_path)
    (tasks, errors) = load_tasks(tmp_path)
    assert errors == [] and [t.task_id for t in tasks] == ["8p_GEMM_Bias"]
    task = tasks[0]
    assert task.source_format == "jaxbench" and task.reference_path == folder / "baseline.py"
    assert task.expert_path == (folder / "optimized.py").resolve()
    assert task.entry_points == ("workload", "computation") and task.operation == "gemm"
    assert task.tolerance(CHECK).atol == task.tolerance(CHECK).rtol == 1e-2
    assert "create_inputs(dtype=jnp.bfloat16)" in " ".join(task.warnings)
    assert task.derivation.sizes[CHECK] == {"M": 1024, "K": 2048, "N": 2048}
    assert folder / "baseline.py" in task.defining_files


def test_a_jaxbench_folder_without_workload_is_refused_by_name(tmp_path):
    folder = write_jaxbench(tmp_path, expert=False)
    text = (folder / "baseline.py").read_text().replace("def workload(", "def work(")
    (folder / "baseline.py").write_text(text)
    _, errors = load_tasks(tmp_path)
    assert len(errors) == 1 and "does not define `workload`" in str(errors[0])


def test_inputs_in_the_yaml_fall_back_to_production_with_a_warning(tmp_path):
    folder = write_plain(tmp_path, "41k_Gemm_Add_ReLU")
    move_inputs_to_yaml(folder)
    task = load_task(folder)
    assert task.configs == (BENCH,) and not task.derived and not task.named_configs
    assert "not derived (get_inputs lives in the yaml's input_gen_code)" in task.warnings[0]


def test_a_literal_size_in_a_shape_moves_with_the_named_size_of_its_value(tmp_path):
    folder = write_plain(tmp_path, "12p_RMSNorm")
    text = (folder / "reference.py").read_text().replace("(hidden,)", "(4096,)")
    (folder / "reference.py").write_text(text)
    sizes = load_task(folder).derivation.sizes
    for config in (CHECK, HELDOUT):
        assert sizes[config]["dim_4096"] == sizes[config]["hidden"]


def test_the_rewritten_builder_reads_sizes_and_makes_every_fixed_key_fresh(tmp_path):
    folder = write_plain(tmp_path, "41k_Gemm_Add_ReLU")
    tree = ast.parse((folder / "reference.py").read_text())
    text = builder_source(tree, "get_inputs", find_sites(tree, "get_inputs").sizes)
    assert "batch_size = __sizes__['batch_size']" in text
    assert "jax.random.key(__mix_seed__(__seed__, 0))" in text
    assert "jax.random.key(__mix_seed__(__seed__, 195936478))" in text


def test_our_format_keeps_the_production_call_and_adds_configs(tmp_path):
    folder = write_plain(tmp_path, "12p_RMSNorm")
    source = (folder / "reference.py").read_text()
    task = load_task(folder)
    rewritten = our_format(source, task.derivation)
    (folder / "reference.py").write_text(rewritten)
    ours = load_task(folder)
    assert ours.source_format == "ours" and ours.configs == (BENCH, CHECK, HELDOUT)
    assert "def get_inputs(config='bench', seed=0, dtype=jnp.float32):" in rewritten
    assert "def computation(x, scale, eps):" in rewritten  # the rest is kept as written


def test_a_shape_kept_as_a_dict_entry_scales_with_the_sizes_it_holds(tmp_path):
    folder = tmp_path / "bias_shape"
    folder.mkdir()
    builder = (
        "config = {'batch': 128, 'channels': 128, 'bias_shape': (128, 1, 1)}\n\n\n"
        "def get_inputs(dtype=jnp.float32):\n"
        "    k1, k2 = jax.random.split(jax.random.key(0))\n"
        "    x = jax.random.uniform(k1, (config['batch'], config['channels'], 1, 1), dtype)\n"
        "    bias = jax.random.normal(k2, config['bias_shape'], dtype)\n"
        "    return [x, bias], []\n"
    )
    (folder / "reference.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\n" + builder + "\n\n"
        "def computation(x, bias):\n    return x + bias\n"
    )
    code = "".join(f"  {line}\n" for line in builder.splitlines())
    (folder / "kernel_task.yaml").write_text(
        f"task_id: bias_shape\ndescription: x\ninput_gen_code: |\n{code}atol: 0.01\nrtol: 0.01\n"
    )
    sizes = load_task(folder).derivation.sizes
    assert sizes[BENCH]["bias_shape[0]"] == 128
    for config in (CHECK, HELDOUT):
        assert sizes[config]["bias_shape[0]"] == sizes[config]["channels"] != 128
