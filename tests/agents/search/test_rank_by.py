"""A search ranks by one of the two speedups over XLA, names it (`--rank-by`, its stored config,
the export) and shows the other beside every score: in the node's line, the export, the CLI's
last line. No jax, no harness: nodes are judged by hand."""

from __future__ import annotations

import json

import pytest

from maxkernel_tui.agents.orchestration.events import SearchNodeChanged, decode
from maxkernel_tui.agents.orchestration.journal import Journal
from maxkernel_tui.agents.search.config import SearchConfig, StoredSearch
from maxkernel_tui.agents.search.describe import describe_node
from maxkernel_tui.agents.search.export import to_json
from maxkernel_tui.agents.search.graph import ACCEPTED, ROOT, SearchGraph
from maxkernel_tui.agents.search.launch import search_limits
from maxkernel_tui.agents.search.runner import SearchOutcome
from maxkernel_tui.cli import build_parser
from maxkernel_tui.commands.search import _finish
from maxkernel_tui.kernels.perf.vs_xla import XlaBaseline
from maxkernel_tui.store.db import Store
from tests.support.engine import GOOD

KIND = "estimated speedup vs XLA@1-pass (as written) on v5e"
ALSO = "1.02x XLA@3-pass (tolerance) (est., v5e)"


@pytest.fixture
def graph(tmp_path):
    with Store(tmp_path / "s.db") as store:
        session = store.create_session("41k", "graph")
        found = SearchGraph(Journal(store, session.id))
        stored = StoredSearch(SearchConfig(rank_by=XlaBaseline.AS_WRITTEN), "seed")
        extra = stored.to_json()
        found.ensure(
            ROOT, number=0, round_=0, parents=[], strategy="initial", plan="first", extra=extra
        )
        version = store.add_kernel_version(session.id, GOOD)
        store.record_evaluation(version.id, {"verdict": ACCEPTED})
        store.record_score(version.id, 0.349, KIND, ALSO)
        found.update(
            found[ROOT],
            ACCEPTED,
            score=0.349,
            score_kind=KIND,
            score_also=ALSO,
            version_id=version.id,
            source=GOOD,
        )
        yield found


def test_the_export_names_what_the_search_ranks_by_and_each_node_s_other_speedup(graph):
    document = json.loads(to_json(graph))
    assert document["rank_by"] == "as-written" and document["score_kind"] == KIND
    (root,) = document["nodes"]
    assert (root["score"], root["score_kind"], root["score_also"]) == (0.349, KIND, ALSO)


def test_a_node_s_line_and_its_words_show_both_figures(graph):
    node = graph[ROOT]
    assert node.score_words() == f"0.349 ({KIND}; {ALSO})"
    stored = graph.store.events(graph.session_id)[-1]
    event = decode(stored.kind, stored.payload)  # as the log replays it
    assert isinstance(event, SearchNodeChanged)
    line = describe_node(event)
    assert line.startswith(f"◆ node #0 accepted 0.349× ({KIND}; {ALSO}) initial")


def test_the_cli_s_last_line_shows_the_best_score_with_the_other_speedup(graph, capsys):
    outcome = SearchOutcome("depth 0 reached", graph[ROOT], KIND, 1, 1, 1)
    assert _finish(outcome, None) == 0
    assert f"best: #0 (kernel v1) initial, 0.349 ({KIND}; {ALSO})" in capsys.readouterr().err


def test_rank_by_is_a_flag_of_search_and_run_and_reaches_the_engine_s_limits():
    parser = build_parser()
    assert parser.parse_args(["search", "--task", "41k"]).rank_by == XlaBaseline.TOLERANCE
    args = parser.parse_args(["search", "--task", "41k", "--rank-by", "as-written"])
    assert args.rank_by == XlaBaseline.AS_WRITTEN
    assert (
        parser.parse_args(["run", "--task", "41k", "--rank-by", "as-written"]).rank_by
        == "as-written"
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["search", "--task", "41k", "--rank-by", "fastest"])
    limits = search_limits(SearchConfig(rank_by=XlaBaseline.AS_WRITTEN))
    assert limits.rank_by == XlaBaseline.AS_WRITTEN
