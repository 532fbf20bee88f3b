"""The reference's XLA cost the session's start described (the task catalog) is reused: handed
to the first profile, and read by the built-in agent's drafts, neither compiling the reference
again."""

import asyncio
from dataclasses import replace

import pytest

from maxkernel_tui.agents.builtin import autotune
from maxkernel_tui.agents.orchestration.tools import build_tools
from maxkernel_tui.kernels.catalog import describe_tasks, described_reference_cost
from maxkernel_tui.kernels.evaluation.profiling.profile import ProfileError
from maxkernel_tui.kernels.loader import find_task
from maxkernel_tui.kernels.service import service as service_module
from maxkernel_tui.kernels.service.service import KernelSource
from maxkernel_tui.kernels.service.setup import EvalOptions, EvaluationSetup
from tests.support.paths import KERNELS


@pytest.mark.slow  # one describe worker: the reference traced, run and compiled for TPU
def test_the_first_profile_gets_the_described_reference_cost(suite_tasks, tmp_path, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(tmp_path / "cache"))
    task = find_task("12p", suite_tasks)
    assert described_reference_cost(task, "v5e") is None  # nothing described yet
    described = describe_tasks([task], tmp_path / "cache", target="v5e", workers=1)
    cost = described[task.task_id].cost
    assert cost is not None and cost.target == "v5e" and cost.flops

    handed: list[object] = []

    def fake_profile(kernel: KernelSource, task: object, **options: object) -> object:
        handed.append(options["reference_costs"])
        raise ProfileError("not profiled in this test")

    monkeypatch.setattr(service_module, "profile_kernel", fake_profile)
    tools = build_tools(EvaluationSetup.local(EvalOptions(target="v5e")), task, tmp_path / "traces")
    result = asyncio.run(tools.profile(KernelSource.read(KERNELS / "honest" / "12p_RMSNorm.py")))
    assert result.error == "not profiled in this test"
    (known,) = handed
    assert known["v5e"].flops == cost.flops and known["v5e"].bytes_accessed == cost.bytes_accessed
    # for another generation the cache has no cost: the profile compiles the reference itself
    assert described_reference_cost(task, "v4") is None

    def no_compile(*args: object) -> object:
        raise AssertionError("the reference was compiled again")

    monkeypatch.setattr(autotune.aot, "compile_for_tpu", no_compile)
    drafted = autotune.reference_cost(task, "v5e")
    assert drafted is not None and drafted.flops == cost.flops
    # the same task asking for gradients is compared with XLA's forward and backward: the
    # description's cost (the forward's) is not handed on
    assert described_reference_cost(replace(task, gradients=("x",)), "v5e") is None
