"""The built-in agent as tester: deterministic edge cases from the check configuration, no jax."""

from __future__ import annotations

import pytest

from maxkernel_tui.agents.builtin.errors import BuiltinAgentError
from maxkernel_tui.agents.builtin.provider import BuiltinProvider
from maxkernel_tui.agents.builtin.tester import answer_tester, odd_tiles
from maxkernel_tui.agents.llm.types import Message, Request, TextDelta
from maxkernel_tui.agents.roles.parsers import edge_proposals, parse_edge_cases
from maxkernel_tui.kernels.loader import builtin_suite_dir

RMSNORM = str(builtin_suite_dir() / "12p_RMSNorm")


def test_sizes_become_odd_numbers_of_their_tile() -> None:
    assert [odd_tiles(v) for v in (512, 1024, 128, 64, 8, 2, 7)] == [384, 896, 384, 56, 24, 1, 5]


def test_one_size_changes_per_proposal_and_the_answer_parses() -> None:
    proposals = edge_proposals(
        parse_edge_cases(answer_tester({"role": "tester", "task_dir": RMSNORM}))
    )
    assert proposals == [
        ("edge_hidden_384", {"batch": 2, "seq": 64, "hidden": 384}),
        ("edge_seq_56", {"batch": 2, "seq": 56, "hidden": 512}),
        ("edge_batch_1", {"batch": 1, "seq": 64, "hidden": 512}),
    ]


def test_a_task_without_configurations_gets_an_empty_answer() -> None:
    from tests.support.paths import ADAPTED_TASKS

    assert (
        edge_proposals(
            parse_edge_cases(answer_tester({"task_dir": str(ADAPTED_TASKS / "2_Softmax_Multi")}))
        )
        == []
    )
    with pytest.raises(BuiltinAgentError, match="task_dir"):
        answer_tester({"role": "tester"})


@pytest.mark.asyncio
async def test_the_provider_answers_the_tester_without_its_worker() -> None:
    provider = BuiltinProvider()
    request = Request(
        messages=(Message("user", "edge cases?"),), context={"role": "tester", "task_dir": RMSNORM}
    )
    text = "".join([c.text async for c in provider.stream(request) if isinstance(c, TextDelta)])
    assert edge_proposals(parse_edge_cases(text))[0][0] == "edge_hidden_384"
    assert provider._worker is None  # no jax process was started for it
    await provider.aclose()
