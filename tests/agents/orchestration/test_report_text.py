"""The check that rejected a kernel reaches the agents as words (for a model's prompt) and as
its code (for the built-in agent, which reads data, not words)."""

from __future__ import annotations

import json

from maxkernel_tui.agents.builtin.answers import _over_vmem
from maxkernel_tui.agents.orchestration.report_text import failure_of
from maxkernel_tui.agents.roles.context import Failure, StepContext
from maxkernel_tui.kernels.report.checks import FAIL, PASS, Check, EvalReport
from maxkernel_tui.kernels.report.reasons import Reason, Said, Target


def _rejected(check: Check) -> EvalReport:
    report = EvalReport("12p", "kernel.py", ["v5e"], "cpu")
    report.add(Check("static", PASS, Reason.STATIC_OK))
    report.add(check)
    return report


def test_the_failure_carries_the_checks_code_across_the_step_context() -> None:
    mosaic = Target("v5e", "RESOURCE_EXHAUSTED: ... space=vmem")
    failure = failure_of(_rejected(Check("tpu_compile", FAIL, Reason.COMPILE_FAILED, mosaic)))
    assert failure == Failure("tpu_compile", check_words(mosaic), Reason.COMPILE_FAILED)
    step = StepContext("/tasks/12p", "v5e", failure=failure)
    carried = json.loads(json.dumps(step.to_request("debugger")))
    assert StepContext.from_request(carried).failure == failure


def test_the_builtin_agent_reads_vmem_over_use_only_in_the_compilers_words() -> None:
    mosaic = Target("v5e", "RESOURCE_EXHAUSTED: ... space=vmem")
    compiled = failure_of(_rejected(Check("tpu_compile", FAIL, Reason.COMPILE_FAILED, mosaic)))
    assert _over_vmem(StepContext("/tasks/12p", "v5e", failure=compiled))
    # the same words from the kernel's own exception at numerics are not the compiler's verdict
    said = Said("vmem")
    raised = failure_of(_rejected(Check("numerics", FAIL, Reason.HARNESS_ERROR, said)))
    assert not _over_vmem(StepContext("/tasks/12p", "v5e", failure=raised))
    assert not _over_vmem(StepContext("/tasks/12p", "v5e", failure=Failure("repeat", "vmem")))


def check_words(target: Target) -> str:
    return Check("tpu_compile", FAIL, Reason.COMPILE_FAILED, target).detail
