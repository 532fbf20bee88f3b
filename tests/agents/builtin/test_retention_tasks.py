"""The decayed-scan family recognised by dataflow on folders written in other styles than the
suite's: MaxKernel's adapted style (production shapes only, sizes in a CONFIG dict at module
level or inside get_inputs, the per-head decay traced from jnp.arange, Mamba-2's inputs named
C, B, x and given x first) and tasks of our own (values before keys before queries, rows
divided by the root of their energy; a decay exp(-dt / 2) summed along the steps, a state size
unlike the value width, an f32 result). Planning is fast; each kernel the agent writes is then
judged by the real harness (slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxkernel_tui.agents.builtin import draft_kernel
from maxkernel_tui.agents.builtin.draft import plan_task, retention_plans
from maxkernel_tui.agents.builtin.program import trace_program
from maxkernel_tui.agents.builtin.retention import DecayKind, recognise_retention
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task

FOLDERS = Path(__file__).parents[2] / "data" / "issue40" / "scan"
# folder -> (query, key, value) argument names, and the decay's form
EXPECTED = {
    "15p_RetNet_Retention": (("q", "k", "v"), DecayKind.HEAD_RATE),
    "16p_Mamba2_SSD": (("C", "B", "x"), DecayKind.CUMULATIVE),
    "decayed_energy_scan": (("qs", "ks", "vals"), DecayKind.HEAD_RATE),
    "selective_state_scan": (("c_proj", "b_proj", "x"), DecayKind.CUMULATIVE),
}


@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_each_folder_is_read_as_a_decayed_scan_by_where_its_inputs_flow(folder):
    program = trace_program(load_task(FOLDERS / folder))
    spec = recognise_retention(program)
    names = program.arg_names
    roles, decay = EXPECTED[folder]
    assert (names[spec.query], names[spec.key], names[spec.value]) == roles
    assert spec.decay is decay


@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_each_folder_is_planned_as_a_chunked_scan(folder):
    plans = plan_task(load_task(FOLDERS / folder))
    assert [plan.family for plan in plans] == ["decayed scan (chunk pairs)"]
    source = plans[0].render(plans[0].start)
    assert "pl.pallas_call" in source and '"arbitrary"' in source


@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_a_carried_state_is_offered_only_where_the_rows_sum_plain_scores_of_a_cumulative_decay(
    folder,
):
    """Both cumulative folders divide by their rows' signed sums: linear, so a state carries
    it; |scores| (RetNet) and scores^2 (the energy scan) are not."""
    program = trace_program(load_task(FOLDERS / folder))
    plans = retention_plans(program, carried_state=True)
    carries = EXPECTED[folder][1] is DecayKind.CUMULATIVE
    assert (plans[0].family == "decayed scan (carried state)") == carries
    source = plans[0].render(plans[0].start)
    assert ("_state_scan(" in source) == carries


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_each_folder_kernel_is_accepted_by_the_harness(folder, tmp_path):
    task = load_task(FOLDERS / folder)
    draft = draft_kernel(task, tune=False)
    kernel = tmp_path / "kernel.py"
    kernel.write_text(draft.source)
    with Harness() as harness:
        report = harness.evaluate(KernelSource.read(kernel), task, EvalOptions(seeds=1))
    assert report.verdict == "accepted", report.failure
