"""Grouped matmuls and routed MoEs written in styles other than the suite's, recognised by
dataflow and accepted by the real harness: a plain folder in MaxKernel's adapted style (sizes in
a module-level dict, one configuration, lists of arguments) and a folder of our own per family
with other argument names, order and sizes (a dense masked grouped matmul over f32 rows; tokens
through a top-3 of 8 experts with the router last and the softmax written out)."""

from __future__ import annotations

import pytest

from maxkernel_tui.agents.builtin import draft_kernel
from maxkernel_tui.agents.builtin.grouped import GroupedFamily
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task
from tests.support.paths import ISSUE40_TASKS

pytestmark = [pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning"), pytest.mark.slow]

FOLDERS = [
    ("grouped_matmul/adapted_gmm", GroupedFamily.GROUPED_MATMUL),
    ("grouped_matmul/expert_rows_masked", GroupedFamily.GROUPED_MATMUL),
    ("routed_moe/adapted_moe", GroupedFamily.ROUTED_MOE),
    ("routed_moe/token_experts", GroupedFamily.ROUTED_MOE),
]


@pytest.fixture(scope="module")
def harness():
    with Harness() as shared:
        yield shared


@pytest.mark.parametrize(("folder", "family"), FOLDERS)
def test_the_folder_is_planned_as_its_family_and_accepted(harness, tmp_path, folder, family):
    task = load_task(ISSUE40_TASKS / folder)
    draft = draft_kernel(task, tune=False)
    kernel = tmp_path / "kernel.py"
    kernel.write_text(draft.source)
    report = harness.evaluate(KernelSource.read(kernel), task, EvalOptions(seeds=1))
    assert report.verdict == "accepted", report.failure
    assert draft.family == family.value
