"""Paged and ragged paged attention read from the reference's jaxpr: the suite's 6p and 7p, and
folders of our own written otherwise, each family in two styles (tests/data/issue40/): plain
folders in MaxKernel's adapted style (sizes in a dict, production shapes only; a decode with no
query-row indices, separate caches after the table and lengths; a ragged serving step with the
caches after the offsets) and configured folders (a ragged attention written per query token,
each token finding its sequence from the start offsets; a decode with the page table last, heads
grouped by a reshape and the softmax written out). The roles come from where the inputs flow,
never from their names; the folders' kernels are judged by the real harness."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxkernel_tui.agents.builtin import CannotPlan, draft_kernel, plan_task
from maxkernel_tui.agents.builtin.paged import recognise_paged_attention
from maxkernel_tui.agents.builtin.tunables import Tunables
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import find_task, load_task
from maxkernel_tui.kernels.report.checks import VERIFIED_AT_PRODUCTION

ISSUE40 = Path(__file__).resolve().parents[2] / "data" / "issue40"
DECODE_ADAPTED = ISSUE40 / "paged_attention" / "decode_adapted"
RAGGED_OWN = ISSUE40 / "ragged_paged_attention" / "mixed_step_configs"
DECODE_OWN = ISSUE40 / "paged_attention" / "decode_configured"
RAGGED_ADAPTED = ISSUE40 / "ragged_paged_attention" / "serving_adapted"
# Recognition runs the reference and the reading at check shapes: seconds each.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")]


def _roles(task):
    spec = recognise_paged_attention(task, CannotPlan("not the program planner's"))
    names = spec.arg_names
    pick = {
        "query": spec.query,
        "keys": spec.keys,
        "values": spec.values,
        "lengths": spec.lengths,
        "table": spec.table,
        "rows": spec.query_rows,
    }
    return spec, {role: None if p is None else names[p] for role, p in pick.items()}


def test_the_suites_paged_tasks_are_read_by_their_dataflow(suite_tasks):
    decode, roles = _roles(find_task("6p", suite_tasks))
    assert not decode.ragged and decode.scale_per_dim
    assert roles == {
        "query": "queries",
        "keys": "k_pages",
        "values": "v_pages",
        "lengths": "kv_lens",
        "table": "page_indices",
        "rows": "cu_q_lens",
    }
    ragged, roles = _roles(find_task("7p", suite_tasks))
    assert ragged.ragged and ragged.arg_names[ragged.live] == "num_seqs"
    assert roles["values"] is None  # keys and values interleaved in one cache
    assert (roles["keys"], roles["lengths"], roles["rows"]) == ("kv_pages", "kv_lens", "cu_q_lens")


def test_our_folders_are_read_whatever_their_names_and_order():
    decode, roles = _roles(load_task(DECODE_ADAPTED))
    assert not decode.ragged
    assert roles == {
        "query": "query",
        "keys": "key_cache",
        "values": "value_cache",
        "lengths": "context_lens",
        "table": "block_tables",
        "rows": None,  # the query's own row: no indices
    }
    ragged, roles = _roles(load_task(RAGGED_OWN))
    assert ragged.ragged and ragged.live is None  # every slot live
    assert (roles["query"], roles["rows"], roles["values"]) == ("q", "query_start", "v_cache")
    # the page table last, heads grouped by a reshape, the softmax written out
    decode, roles = _roles(load_task(DECODE_OWN))
    assert not decode.ragged
    assert (roles["query"], roles["table"], roles["lengths"], roles["rows"]) == (
        "q",
        "page_table",
        "seq_lens",
        None,
    )
    # the caches after the offsets, the group size a static argument
    ragged, roles = _roles(load_task(RAGGED_ADAPTED))
    assert ragged.ragged and ragged.live is None
    assert (roles["keys"], roles["values"], roles["rows"], roles["lengths"]) == (
        "k_pages",
        "v_pages",
        "cu_q_lens",
        "kv_lens",
    )


def test_the_kernel_file_prefetches_the_page_table(suite_tasks):
    for task_id, family in (("6p", "paged attention"), ("7p", "ragged paged attention")):
        (plan,) = plan_task(find_task(task_id, suite_tasks))
        source = plan.render(Tunables(block_rows=64, block_cols=256))
        assert plan.family == family
        assert "PrefetchScalarGridSpec" in source and "KV_TOKENS_PER_BLOCK = 256" in source
        assert "import maxkernel_tui" not in source  # the file stands alone


# The harness on four tasks, minutes on a busy machine: the two configured styles (planned above
# in every run) are judged under `-m coverage` only (80 s and 39 s of a CI process).
@pytest.mark.heavy
@pytest.mark.parametrize(
    "folder",
    [
        DECODE_ADAPTED,
        RAGGED_ADAPTED,
        pytest.param(DECODE_OWN, marks=pytest.mark.coverage),
        pytest.param(RAGGED_OWN, marks=pytest.mark.coverage),
    ],
    ids=["decode-adapted", "ragged-adapted", "decode-configured", "ragged-configured"],
)
def test_our_folders_kernels_are_accepted(folder, tmp_path):
    """Each family in both styles. An adapted folder has production shapes only, compared
    there in full: its verdict says so (it said "small shapes only" of a task that has none)."""
    task = load_task(folder)
    kernel = tmp_path / "kernel.py"
    kernel.write_text(draft_kernel(task, tune=False).source)
    with Harness() as harness:
        report = harness.evaluate(KernelSource.read(kernel), task, EvalOptions(seeds=1))
    assert report.verdict == "accepted", report.failure
    if len(task.configs) == 1:
        assert report.scope == VERIFIED_AT_PRODUCTION
