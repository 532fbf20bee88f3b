"""The search screen's detail pane shows a node's verdict evidence as eval prints it, one line
each, with the edge cases' underscored names kept as written (not read as Markdown emphasis)."""

from maxkernel_tui.agents.search.graph import ACCEPTED, REJECTED, Node
from maxkernel_tui.kernels.report.checks import SMALL_SHAPES_ONLY, VERIFIED_AT_PRODUCTION
from maxkernel_tui.screens.search_evidence import evidence_facts

EVIDENCE = [
    "check seeds 1804289383, 846930886 (batch 256, in_features 512)",
    "edge cases edge_in_features_384, edge_batch_128 (seed 1804349345)",
    "production tiles (pass): 8 of 128 output blocks, sample seed 424238335, inputs seed 0",
]


def _node(status: str, scope: str, evidence: list[str]) -> Node:
    return Node(
        "n3", 3, 1, ["n0"], "grow-row-blocks", status=status, evidence=evidence, scope=scope
    )


def test_an_accepted_node_says_where_its_verdict_was_earned_and_on_what():
    (paragraph,) = evidence_facts(_node(ACCEPTED, VERIFIED_AT_PRODUCTION, EVIDENCE))
    lines = paragraph.split("  \n")
    assert lines[0] == f"accepted, {VERIFIED_AT_PRODUCTION}"
    assert lines[2] == (
        r"evidence: edge cases edge\_in\_features\_384, edge\_batch\_128 (seed 1804349345)"
    )
    assert lines[3].startswith("evidence: production tiles (pass): 8 of 128 output blocks")
    assert len(lines) == 1 + len(EVIDENCE)


def test_a_node_checked_at_small_shapes_only_says_so():
    (paragraph,) = evidence_facts(_node(ACCEPTED, SMALL_SHAPES_ONLY, EVIDENCE[:1]))
    assert paragraph.startswith(f"accepted, {SMALL_SHAPES_ONLY}  \nevidence: check seeds")


def test_a_rejected_node_shows_its_evidence_without_a_scope_and_an_unjudged_one_nothing():
    (paragraph,) = evidence_facts(_node(REJECTED, "", EVIDENCE[:1]))
    assert paragraph.startswith("evidence: check seeds") and "accepted" not in paragraph
    assert evidence_facts(_node("pending", "", [])) == []
