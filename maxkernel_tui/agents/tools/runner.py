"""Carries out one tool call of a sub-agent (`Toolbox.run`): checks it against the tools its role
was offered, runs it, and returns its result as text for the model, errors included (a failing
tool or a malformed call is an answer the model reads, never an exception of the session).
`lower` and `check` go through the harness (`Harness.probe`): the candidate runs in the
harness's own isolated worker process, as in an evaluation. No jax here."""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from maxkernel_tui.agents.knowledge import topic
from maxkernel_tui.agents.llm.types import ToolCall
from maxkernel_tui.agents.roles.context import StepContext
from maxkernel_tui.agents.tools.jax_api import JaxApi, LookupFailed
from maxkernel_tui.agents.tools.specs import CallProblem, ToolName, checked_arguments
from maxkernel_tui.kernels.config_names import CHECK
from maxkernel_tui.kernels.evaluation.options import Probe, UsageError
from maxkernel_tui.kernels.evaluation.protocol import ProbeStage
from maxkernel_tui.kernels.limits import text_oversize_problem
from maxkernel_tui.kernels.report.checks import EvalReport, format_check
from maxkernel_tui.kernels.service.service import KernelSource, ProfileResult
from maxkernel_tui.kernels.task import Task

RESULT_CHARS = 8000  # a result longer than this is cut: it goes into every later prompt


class Prober(Protocol):
    """Runs the harness's probe (KernelTools); None where the executor has none."""

    async def probe(self, kernel: KernelSource, probe: Probe) -> EvalReport: ...


class Profiler(Protocol):
    """The session's profiler (its `Tools`): an estimate of a kernel not profiled yet."""

    async def profile(
        self, kernel: KernelSource, *, estimate_only: bool = False
    ) -> ProfileResult: ...


@dataclass(frozen=True)
class ToolResult:
    text: str
    ok: bool  # False: the call was refused or the tool failed (the text says why)
    seconds: float


class Toolbox:
    """The tools of one session: its task and target, where candidate files are written, and the
    harness (through `prober`) and profiler they use."""

    def __init__(
        self,
        task: Task,
        target: str,
        workdir: Path,
        *,
        prober: Prober | None = None,
        profiler: Profiler | None = None,
        jax_api: JaxApi | None = None,
    ) -> None:
        self.task, self.target, self.workdir = task, target, workdir
        self._prober, self._profiler = prober, profiler
        self._jax_api = jax_api or JaxApi()
        self._files = 0

    async def run(
        self, call: ToolCall, offered: tuple[ToolName, ...], ctx: StepContext
    ) -> ToolResult:
        started = time.monotonic()
        checked = checked_arguments(call, offered)
        if isinstance(checked, CallProblem):
            return ToolResult(checked.text, False, time.monotonic() - started)
        tool, arguments = checked
        try:
            text = await self._carry_out(tool, arguments, ctx)
            ok = True
        except ToolFailed as failure:
            text, ok = f"error: {failure}", False
        if len(text) > RESULT_CHARS:
            text = text[:RESULT_CHARS] + f"\n[... cut at {RESULT_CHARS} characters]"
        return ToolResult(text, ok, time.monotonic() - started)

    async def _carry_out(
        self, tool: ToolName, arguments: Mapping[str, Any], ctx: StepContext
    ) -> str:
        match tool:
            case ToolName.JAX_API:
                try:
                    return await self._jax_api.lookup(str(arguments["name"]))
                except LookupFailed as failure:
                    raise ToolFailed(str(failure)) from None
            case ToolName.KNOWLEDGE:
                return topic(str(arguments["topic"]))
            case ToolName.LOWER:
                compiled = arguments.get("compile", True)
                stage = ProbeStage.TPU_COMPILE if compiled else ProbeStage.TPU_LOWER
                config = self._config(arguments.get("config"), self.task.configs[0])
                return await self._probe(str(arguments["source"]), config, stage)
            case ToolName.CHECK:
                default = CHECK if CHECK in self.task.configs else self.task.configs[0]
                config = self._config(arguments.get("config"), default)
                return await self._probe(str(arguments["source"]), config, ProbeStage.NUMERICS)
            case ToolName.PROFILE_SUMMARY:
                return await self._profile_summary(ctx)

    def _config(self, wanted: Any, default: str) -> str:
        visible = self.task.agent_visible_configs()
        config = default if wanted in (None, "") else str(wanted)
        if config not in visible:
            raise ToolFailed(f"no configuration {config!r}; the task's are: {', '.join(visible)}")
        return config

    def _write(self, source: str) -> KernelSource:
        """`source` as the harness takes it, kept in the session's folder too (tool-N.py)."""
        self._files += 1
        path = self.workdir / f"tool-{self._files}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
        return KernelSource(source, path.name)

    async def _probe(self, source: str, config: str, stage: ProbeStage) -> str:
        if self._prober is None:
            raise ToolFailed("this session's executor cannot run probes; propose the kernel")
        if too_large := text_oversize_problem(source, "the source"):
            raise ToolFailed(too_large)
        kernel = self._write(source)
        seed = secrets.randbelow(2**31 - 1)
        probe = Probe(config, stage, target=self.target, seed=seed)
        try:
            report = await self._prober.probe(kernel, probe)
        except UsageError as error:
            raise ToolFailed(str(error)) from None
        # the candidate worker words its stages for an evaluation; a probe ran them at `config`
        shapes = "production shapes" if config == self.task.configs[0] else f"{config} shapes"
        lines = [
            format_check(check).replace("at production shapes", f"at {shapes}")
            for check in report.checks
        ]
        failed = report.failure
        # the conclusion first: it is what the model (and the Agents pane's line) reads first
        if failed is None:
            what = {
                ProbeStage.TPU_LOWER: "lowered",
                ProbeStage.TPU_COMPILE: "compiled",
                ProbeStage.NUMERICS: "checked",
            }
            lines.insert(0, f"passed: {what[stage]} at {config} for TPU {self.target}")
        else:
            lines.insert(0, f"failed at {failed.name}: {failed.detail[:200]}")
        if stage == ProbeStage.NUMERICS:
            lines.append(f"(one seed, {seed}, at {config}: feedback, not the harness's verdict)")
        return "\n".join(lines)

    async def _profile_summary(self, ctx: StepContext) -> str:
        if ctx.profile_text:
            return ctx.profile_text
        if not ctx.kernel:
            raise ToolFailed("there is no current kernel yet, so no profile")
        if self._profiler is None:
            raise ToolFailed("no profiler in this session")
        result = await self._profiler.profile(self._write(ctx.kernel), estimate_only=True)
        if result.summary is None:
            raise ToolFailed(f"the current kernel could not be profiled: {result.error}")
        return "estimate only (the current kernel is not profiled yet):\n" + result.text

    def close(self) -> None:
        self._jax_api.close()


class ToolFailed(Exception):
    """The tool ran and could not answer; the message is for the model."""
