"""The loader reads the adapted format as is and names the file and problem of bad tasks."""

import shutil
import textwrap

import pytest

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.loader import find_task, load_task, load_tasks
from maxkernel_tui.kernels.task import TaskError, Tolerance
from tests.support.paths import ADAPTED_TASKS

GOOD_YAML = "task_id: t1\ndescription: doubles x\natol: 0.01\nrtol: 0.02\n"
GOOD_REFERENCE = textwrap.dedent("""
    import jax.numpy as jnp

    def get_inputs():
        return (jnp.ones((8, 128)),), (2.0,)

    def computation(x, factor):
        return x * factor
""")


def write_task(root, name="t1", yaml_text=GOOD_YAML, reference=GOOD_REFERENCE):
    folder = root / name
    folder.mkdir()
    if yaml_text is not None:
        (folder / "kernel_task.yaml").write_text(yaml_text)
    if reference is not None:
        (folder / "reference.py").write_text(textwrap.dedent(reference))
    return folder


def test_plain_adapted_task_loads_with_its_tolerances(tmp_path):
    task = load_task(write_task(tmp_path))
    assert task.task_id == "t1"
    # its shape literal (8, 128) is a size: 128 is doubled for check, 8 is structure
    assert task.configs == ("bench", "check", "heldout") and task.derived
    assert task.derivation.sizes["check"] == {"dim_128": 256}
    assert task.tolerance("bench") == task.tolerance("check") == Tolerance(0.01, 0.02)
    assert task.category == "custom" and task.operation == "doubles x"
    assert task.source_format == "plain" and not task.inputs_from_yaml


def test_missing_tolerances_default_like_maxkernel(tmp_path):
    task = load_task(write_task(tmp_path, yaml_text="task_id: t1\ndescription: d\n"))
    assert task.tolerance("bench") == Tolerance(1e-3, 1e-3)


@pytest.mark.parametrize(
    ("yaml_text", "reference", "file", "problem"),
    [
        (None, GOOD_REFERENCE, "kernel_task.yaml", "missing file"),
        (GOOD_YAML, None, "reference.py", "missing file"),
        (
            "task_id: t1\ndescription: [unclosed\n",
            GOOD_REFERENCE,
            "kernel_task.yaml",
            "invalid YAML at line",
        ),
        ("- just\n- a list\n", GOOD_REFERENCE, "kernel_task.yaml", "expected a mapping"),
        ("description: no id\n", GOOD_REFERENCE, "kernel_task.yaml", "missing or empty `task_id`"),
        (GOOD_YAML, "def computation(x:\n", "reference.py", "does not parse"),
        (
            GOOD_YAML,
            "def get_inputs():\n    return (), ()\n",
            "reference.py",
            "does not define `computation`",
        ),
        (GOOD_YAML, "def computation(x):\n    return x\n", "kernel_task.yaml", "no `get_inputs`"),
        ("task_id: t1\natol: [0.1, 0.2]\n", GOOD_REFERENCE, None, None),
        (
            "task_id: t1\natol: fast\n",
            GOOD_REFERENCE,
            "kernel_task.yaml",
            "`atol` must be a number",
        ),
        ("task_id: t1\nrtol: [0.1, x]\n", GOOD_REFERENCE, "kernel_task.yaml", "is not a number"),
    ],
)
def test_malformed_task_error_names_file_and_problem(tmp_path, yaml_text, reference, file, problem):
    folder = write_task(tmp_path, yaml_text=yaml_text, reference=reference)
    if file is None:  # a two-entry tolerance list is valid: it declares two input pairs
        assert load_task(folder).configs == ("bench.0", "bench.1")
        return
    with pytest.raises(TaskError) as caught:
        load_task(folder)
    assert caught.value.path == folder / file
    assert problem in caught.value.problem
    assert str(folder / file) in str(caught.value)


def test_our_config_extension_needs_a_bench_config(tmp_path):
    reference = GOOD_REFERENCE.replace(
        "def get_inputs():", 'CONFIGS = {"small": {}}\n\ndef get_inputs(config="small"):'
    )
    with pytest.raises(TaskError, match="no 'bench'"):
        load_task(write_task(tmp_path, reference=reference))


def test_load_tasks_keeps_good_tasks_and_reports_bad_ones(tmp_path):
    write_task(tmp_path, "a_good")
    write_task(tmp_path, "b_bad", yaml_text="task_id: [\n")
    tasks, errors = load_tasks(tmp_path)
    assert [t.task_id for t in tasks] == ["t1"]
    assert len(errors) == 1 and errors[0].path.parent.name == "b_bad"


def test_get_inputs_that_raises_is_a_task_error(tmp_path):
    reference = GOOD_REFERENCE.replace(
        "return (jnp.ones((8, 128)),), (2.0,)", "raise ValueError('no data')"
    )
    task = load_task(write_task(tmp_path, reference=reference))
    module = runtime.load_reference(task)
    with pytest.raises(
        TaskError, match=r"get_inputs raised ValueError: no data \(reference.py:\d+\)"
    ):
        runtime.input_specs(task, module, "bench")


def test_signature_mismatch_is_a_task_error(tmp_path):
    reference = GOOD_REFERENCE.replace(
        "def computation(x, factor):", "def computation(x):"
    ).replace("x * factor", "x")
    task = load_task(write_task(tmp_path, reference=reference))
    module = runtime.load_reference(task)
    with pytest.raises(
        TaskError, match=r"signature mismatch: computation\(x\) cannot take 1 array"
    ):
        runtime.output_specs(task, module, "bench")


def test_reference_that_fails_to_import_is_a_task_error(tmp_path):
    task = load_task(
        write_task(tmp_path, reference=GOOD_REFERENCE + "\nimport not_a_module_anywhere\n")
    )
    with pytest.raises(TaskError, match="fails to import: ModuleNotFoundError"):
        runtime.load_reference(task)


def test_static_args_must_be_python_scalars(tmp_path):
    reference = GOOD_REFERENCE.replace("(2.0,)", "(jnp.float32(2.0),)")
    task = load_task(write_task(tmp_path, reference=reference))
    with pytest.raises(TaskError, match="static args must be Python scalars"):
        runtime.make_inputs(task, runtime.load_reference(task), "bench")


def test_adapted_folder_written_elsewhere_loads_unmodified():
    tasks, errors = load_tasks(ADAPTED_TASKS)
    assert errors == []
    add, softmax = tasks
    assert add.task_id == "1_Vector_Add" and add.configs == ("bench", "check", "heldout")
    assert softmax.inputs_from_yaml and softmax.configs == ("bench.0", "bench.1")
    assert softmax.tolerance("bench.1") == Tolerance(0.02, 0.01)

    module = runtime.load_reference(softmax)
    specs, static = runtime.input_specs(softmax, module, "bench.1")
    assert [s.shape for s in specs] == [(64, 512)] and static == ()
    _, static_add, out = runtime.run_reference(add, runtime.load_reference(add), "bench")
    assert static_add == (2.0,) and out.shape == (4096,)


def test_plain_list_of_inputs_names_configs_by_position(tmp_path):
    folder = shutil.copytree(ADAPTED_TASKS / "2_Softmax_Multi", tmp_path / "s")
    (folder / "kernel_task.yaml").write_text(
        (folder / "kernel_task.yaml").read_text().replace("atol: [0.01, 0.02]", "atol: 0.01")
    )
    task = load_task(folder)
    assert task.configs == ("bench",)  # unknown until the inputs are traced
    assert runtime.config_names(task, runtime.load_reference(task)) == ("bench.0", "bench.1")


def test_find_task_by_number_prefix(suite_tasks):
    assert find_task("12p", suite_tasks).task_id == "12p_RMSNorm"
    with pytest.raises(KeyError):
        find_task("99z", suite_tasks)


def test_a_task_without_gradients_is_forward_only(tmp_path):
    assert load_task(write_task(tmp_path)).gradients == ()


@pytest.mark.parametrize("declared", ["[x]", "x", "' x , '"])
def test_gradients_name_computations_parameters_as_a_list_or_a_string(tmp_path, declared):
    task = load_task(write_task(tmp_path, yaml_text=GOOD_YAML + f"gradients: {declared}\n"))
    assert task.gradients == ("x",)


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        ("[y]", "not parameters of computation(x, factor)"),
        ("[x, x]", "repeats a name"),
        ("{x: 1}", "must be a list"),
        ("[1]", "must be a list"),
    ],
)
def test_bad_gradients_name_the_yaml_and_the_problem(tmp_path, declared, problem):
    with pytest.raises(TaskError) as raised:
        load_task(write_task(tmp_path, yaml_text=GOOD_YAML + f"gradients: {declared}\n"))
    assert raised.value.path.name == "kernel_task.yaml" and problem in raised.value.problem


def test_gradient_tolerances_default_to_the_forwards_per_configuration(tmp_path):
    task = load_task(write_task(tmp_path, yaml_text=GOOD_YAML + "gradients: [x]\n"))
    assert all(task.gradient_tolerance(c) == task.tolerance(c) for c in task.configs)


def test_grad_atol_and_grad_rtol_set_the_gradients_tolerance(tmp_path):
    yaml_text = GOOD_YAML + "gradients: [x]\ngrad_atol: 0.05\n"
    task = load_task(write_task(tmp_path, yaml_text=yaml_text))
    tolerance = task.gradient_tolerance(task.configs[0])
    assert tolerance.atol == 0.05 and tolerance.rtol == task.tolerance(task.configs[0]).rtol
