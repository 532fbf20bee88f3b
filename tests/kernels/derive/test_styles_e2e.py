"""The styled task folders, one style per family and every style met, through the describe
worker: the derived `check` runs to finite outputs, `heldout` traces, and the shapes the
reference receives keep their ties (a contraction's two sides, a head and a group count dividing
their sizes); a derived configuration too large for the machine's memory is refused with the
reason, not run."""

import pytest

from maxkernel_tui.kernels import describe, memory
from maxkernel_tui.kernels.catalog import describe_tasks
from maxkernel_tui.kernels.config_names import CHECK, HELDOUT
from maxkernel_tui.kernels.loader import load_task, load_tasks
from tests.support.maxkernel_styles import write_styled

pytestmark = pytest.mark.slow  # jax workers: about 40 s of CPU here

# one style per family, so each style meets several families
ONE_STYLE_EACH = {
    "gemm_epilogue": "literal",
    "gemm_rowsum_equal_sizes": "dict",
    "attention_heads": "literal",
    "conv_bias_relu": "dict",
    "gemm_groupnorm": "module_dict",
}


def test_derived_configurations_validate_in_the_worker_and_keep_their_ties(tmp_path):
    for family, style in ONE_STYLE_EACH.items():
        write_styled(tmp_path / "tasks", family, style)
    tasks, errors = load_tasks(tmp_path / "tasks")
    assert errors == []
    described = describe_tasks(tasks, tmp_path / "cache", with_cost=False, workers=2)
    shapes = {}
    for task in tasks:
        description = described[task.task_id]
        assert description.error is None, description.error
        assert description.configs[CHECK].reference_seconds is not None  # it ran
        shapes[task.task_id] = {
            config: [spec.shape for spec in description.configs[config].inputs]
            for config in (CHECK, HELDOUT)
        }
    for config in (CHECK, HELDOUT):
        x, w, b = shapes["gemm_rowsum_equal_sizes_dict"][config]
        assert x[1] == w[0] and w[1] == b[0]  # the contraction and the bias
        x, w, b = shapes["gemm_epilogue_literal"][config]
        assert x[1] == w[0] and w[1] == b[0]
        q, _, _ = shapes["attention_heads_literal"][config]
        assert q[2] % 24 == 0
        x, w, gamma = shapes["gemm_groupnorm_module_dict"][config]
        assert w[1] % 48 == 0 and gamma == [w[1]]
        x, w, _ = shapes["conv_bias_relu_dict"][config]
        assert x[1] == w[1]


def test_a_configuration_beyond_the_available_memory_is_refused_with_its_reason(
    tmp_path, monkeypatch
):
    folder = write_styled(tmp_path, "gemm_epilogue", "named")
    monkeypatch.setattr(memory, "available_bytes", lambda: 16 * 2**20)
    found = describe.describe_folder(folder, with_cost=False)
    assert found.error is not None
    # 2048x2048 x and w and a 2048 bias in f32: 32 MiB of inputs, a 16 MiB output
    assert "the derived 'check' configuration was not run: it needs about 48 MiB" in found.error
    assert "(inputs 32 MiB, outputs and XLA temporaries 16 MiB" in found.error
    assert "this machine has 16 MiB available" in found.error
    monkeypatch.undo()
    assert describe.describe_folder(load_task(folder).folder, with_cost=False).error is None
