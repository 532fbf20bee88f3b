"""MLA recognised by dataflow on task folders of our own (tests/data/issue40/mla/): one written
as MaxKernel's adapted dataset writes a task (a module-level dict of sizes, no configurations:
the loader derives the small shapes), and one in a third style (named configurations, weights
before the activations, its own names, no low-rank query, RoPE on interleaved pairs, a -inf
mask from position comparisons, a softmax spelled out). The agent reads each one's roles and
RoPE from the jaxpr, and the real harness accepts the kernel it writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxkernel_tui.agents.builtin import draft_kernel
from maxkernel_tui.agents.builtin.mla import recognise_mla
from maxkernel_tui.agents.builtin.program import Probe, trace_program
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task

FOLDERS = Path(__file__).resolve().parents[2] / "data" / "issue40" / "mla"
# Tracing, a jnp reading at check shapes, then the harness: minutes on a 2-core machine.
pytestmark = [pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning"), pytest.mark.slow]


def test_the_third_style_reads_its_own_roles_and_interleaved_rope():
    task = load_task(FOLDERS / "latent_attn_yaml")
    spec = recognise_mla(trace_program(task, Probe.VARYING), task)
    # computation(w_out, w_latent, w_query, w_values, w_keys, hidden, ...)
    assert (spec.x, spec.q_down, spec.q_up, spec.kv_down, spec.k_up, spec.v_up, spec.o_proj) == (
        5,
        None,
        2,
        1,
        4,
        3,
        0,
    )
    assert spec.interleaved and spec.theta == 500000.0
    assert spec.core.causal and spec.core.mask_value == float("-inf")


# The yaml-configured folder (its spec read above in every run) is judged under `-m coverage`
# only (44 s of a CI process).
@pytest.mark.heavy
@pytest.mark.parametrize(
    "name", ["mla_adapted", pytest.param("latent_attn_yaml", marks=pytest.mark.coverage)]
)
def test_own_mla_folders_are_planned_and_accepted(tmp_path, name):
    task = load_task(FOLDERS / name)
    draft = draft_kernel(task, tune=False)
    assert draft.family.startswith("MLA")
    kernel = tmp_path / "kernel.py"
    kernel.write_text(draft.source)
    with Harness() as harness:
        report = harness.evaluate(KernelSource.read(kernel), task, EvalOptions(seeds=1))
    assert report.verdict == "accepted", report.failure
