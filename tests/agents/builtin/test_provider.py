"""The built-in agent as a provider, through the real LLMClient: each role's answer in the
contract's format, kernels the real harness accepts, plain errors, and no jax in the caller."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from maxkernel_tui.agents.builtin.errors import (
    CANNOT_PLAN_PREFIX,
    BuiltinAgentError,
    CannotPlanError,
)
from maxkernel_tui.agents.llm.client import LLMClient
from maxkernel_tui.agents.llm.types import Message, Request
from maxkernel_tui.agents.providers import build_provider
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task
from maxkernel_tui.kernels.perf.analysis import KernelAnalysis
from maxkernel_tui.kernels.perf.model import Estimate
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from tests.support.unplannable import write_sorting_task

RMSNORM = builtin_suite_dir() / "12p_RMSNorm"
PLAN_HEADINGS = ("tiling", "grid", "memory", "expected bound")


def ask(role: str, task_dir: Path, **context: object) -> Request:
    return Request(
        (Message("user", f"{role} step"),),
        context={"role": role, "task_dir": str(task_dir), "target": "v5e", **context},
    )


def kernel_of(answer: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", answer, re.DOTALL)
    assert len(blocks) == 1, answer[:500]
    return blocks[0]


@pytest.mark.slow  # the agent's jax worker
async def test_plan_kernel_and_next_kernel_for_rmsnorm(tmp_path):
    provider = build_provider({"name": "builtin"})
    client = LLMClient(provider)
    try:
        await provider.draft_ahead(str(RMSNORM), "v5e")  # as a session does while describing
        plan = await client.complete(ask("planner", RMSNORM))
        headings = {h.strip().lower() for h in re.findall(r"^## (.+)$", plan.text, re.MULTILINE)}
        assert set(PLAN_HEADINGS) <= headings, plan.text
        assert "row-wise reduction" in plan.text and "estimate" in plan.text
        assert (plan.usage.provider, plan.usage.model, plan.usage.cost_usd) == (
            "builtin",
            "builtin",
            0.0,
        )

        implemented = await client.complete(ask("implementer", RMSNORM, plan=plan.text))
        source = kernel_of(implemented.text)
        assert re.search(r"^# Tunables.*\n(?:[A-Z_]+ = \d+\n)+", source, re.MULTILINE)
        kernel = tmp_path / "kernel.py"
        kernel.write_text(source)
        with Harness() as harness:
            report = harness.evaluate(
                KernelSource.read(kernel), load_task(RMSNORM), EvalOptions(seeds=1)
            )
        assert report.verdict == "accepted", report.failure

        failure = {
            "check": "tpu_compile",
            "detail": "RESOURCE_EXHAUSTED: ... space=vmem",
            "reason": "compile_failed",
        }
        fixed = await client.complete(ask("debugger", RMSNORM, kernel=source, failure=failure))
        assert kernel_of(fixed.text).strip() != source.strip()
        assert "halved block sizes" in fixed.text  # the remedy for VMEM over-use comes first

        explained = await client.complete(ask("explainer", RMSNORM, question="why these blocks?"))
        assert "row-wise reduction" in explained.text and "```" not in explained.text
    finally:
        await provider.aclose()


@pytest.mark.slow  # the agent's jax worker
async def test_a_task_it_cannot_plan_gets_a_plain_error(tmp_path):
    provider = build_provider({"name": "builtin"})
    try:
        with pytest.raises(CannotPlanError) as raised:
            await LLMClient(provider).complete(ask("implementer", write_sorting_task(tmp_path)))
    finally:
        await provider.aclose()
    assert str(raised.value).startswith(CANNOT_PLAN_PREFIX) and "sort" in str(raised.value)
    assert not raised.value.retryable


@pytest.mark.parametrize(
    ("context", "error"),
    [
        (None, "needs the request's context"),
        ({"role": "reviewer", "task_dir": str(RMSNORM)}, "does not play role 'reviewer'"),
        ({"role": "planner"}, "no task_dir"),
        ({"role": "planner", "task_dir": "/nonexistent/task"}, "not a usable task"),
        ({"role": "planner", "task_dir": str(RMSNORM), "target": "v9"}, "unknown TPU target 'v9'"),
        ({"role": "profiler", "task_dir": str(RMSNORM)}, "needs the profile"),
    ],
)
async def test_a_missing_or_invalid_context_is_a_plain_error(context, error):
    provider = build_provider({"name": "builtin"})
    with pytest.raises(BuiltinAgentError, match=error) as raised:
        await LLMClient(provider).complete(Request((Message("user", "hi"),), context=context))
    assert not raised.value.retryable
    await provider.aclose()


def profile(steps: int, hbm_bytes: int, bound: str, share: float, fits: bool = True) -> dict:
    """A profile summary as the engine sends it (ProfileSummary.to_json()) with these figures."""
    kernel = KernelAnalysis(
        name="_stage1_kernel",
        grid=[steps],
        dimension_semantics=["parallel"],
        blocks=[],
        scalar_prefetch=0,
        vmem_bytes=2**20,
        vmem_limit_bytes=None,
        hbm_bytes=hbm_bytes,
        steps=steps,
        mxu_flops_per_step=0.0,
        mxu_f32_flops_per_step=0.0,
        vector_ops_per_step=0.0,
        transcendentals_per_step=0.0,
    )
    estimate = Estimate(
        target="v5e",
        kind="estimated",
        seconds=1e-3,
        bound=bound,
        transfer_seconds=1e-3,
        compute_seconds=1e-4,
        overhead_seconds=1e-5,
        hbm_bytes=hbm_bytes,
        flops=1e9,
        vmem_bytes=2**20,
        vmem_capacity=128 * 2**20,
        fits_vmem=fits,
        roofline_seconds=share * 1e-3,
        roofline_share=share,
        reference_seconds=None,
        speedup=None,
    )
    summary = ProfileSummary(
        "12p_RMSNorm", "kernel.py", "bench", [kernel], [estimate], {"v5e": []}, {}
    )
    return summary.to_json()


@pytest.mark.parametrize(
    ("summary", "next_words"),
    [
        (profile(4096, 4096 * 8 * 1024, "overhead", 0.2), "raise the block sizes"),
        (profile(16, 16 * 2**20, "memory", 0.4), "fetched from HBM fewer times"),
        (profile(16, 16 * 2**20, "memory", 0.9), "stop tuning"),
        (profile(16, 16 * 2**20, "memory", 0.4, fits=False), "halve the largest block"),
    ],
)
async def test_the_profiler_names_one_next_step_from_the_figures(summary, next_words):
    provider = build_provider({"name": "builtin"})
    answer = await LLMClient(provider).complete(ask("profiler", RMSNORM, profile=summary))
    next_lines = [line for line in answer.text.splitlines() if line.startswith("Next:")]
    assert len(next_lines) == 1 and next_words in next_lines[0], answer.text
    await provider.aclose()


@pytest.mark.slow  # the agent's jax worker
def test_the_caller_never_imports_jax():
    script = textwrap.dedent(f"""
        import asyncio, sys
        from maxkernel_tui.agents.llm.client import LLMClient
        from maxkernel_tui.agents.providers import build_provider
        from maxkernel_tui.agents.llm.types import Message, Request

        async def main():
            provider = build_provider({{"name": "builtin"}})
            context = {{"role": "planner", "task_dir": {str(RMSNORM)!r}}}
            request = Request((Message("user", "plan"),), context=context)
            answer = await LLMClient(provider).complete(request)
            await provider.aclose()
            assert "## Tiling" in answer.text
            print(sorted(m for m in sys.modules if m.split(".")[0] in ("jax", "jaxlib")))

        asyncio.run(main())
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


async def test_a_profile_that_is_not_a_summary_is_a_plain_error():
    provider = build_provider({"name": "builtin"})
    with pytest.raises(BuiltinAgentError, match="not a profile summary") as raised:
        await LLMClient(provider).complete(ask("profiler", RMSNORM, profile={"kernels": []}))
    assert not raised.value.retryable
    await provider.aclose()
