"""The engine's tools in a workbench session, with the kernels judged ahead of the engineer's key
(draft-ahead) taken from there: a proposal approved as it was shown is not judged a second
time, and the verdict the engine records is the one its card showed. Everything else (edge-case
passes, profiles, a kernel the engineer edited, any evaluation once edge cases join the
checks) goes to the session's tools. No Textual, no jax."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from maxkernel_tui.agents.orchestration.tools import Tools
    from maxkernel_tui.kernels.edge_configs import EdgeConfig
    from maxkernel_tui.kernels.report.checks import EvalReport
    from maxkernel_tui.kernels.service.service import (
        CheckListener,
        KernelSource,
        ProfileResult,
    )


class DraftedTools:
    def __init__(self, tools: Tools, drafts: dict[str, EvalReport]) -> None:
        """`drafts`: reports by kernel source, judged on the same setup (the session's)."""
        self.tools, self.drafts = tools, drafts
        self.task, self.target = tools.task, tools.target
        self._edges = False  # edge cases joined the checks: a draft no longer has them all

    async def evaluate(
        self,
        kernel: KernelSource,
        on_check: CheckListener | None = None,
        *,
        edges_only: bool = False,
    ) -> EvalReport:
        drafted = None if edges_only or self._edges else self.drafts.get(kernel.text)
        if drafted is None:
            return await self.tools.evaluate(kernel, on_check, edges_only=edges_only)
        for check in drafted.checks:
            if on_check is not None:
                on_check(check)
        return drafted

    async def profile(self, kernel: KernelSource, *, estimate_only: bool = False) -> ProfileResult:
        return await self.tools.profile(kernel, estimate_only=estimate_only)

    async def validate_edge_configs(
        self, proposals: list[EdgeConfig]
    ) -> tuple[list[EdgeConfig], list[str]]:
        return await self.tools.validate_edge_configs(proposals)

    def set_extra_configs(self, configs: list[EdgeConfig]) -> None:
        self._edges = self._edges or bool(configs)
        self.tools.set_extra_configs(configs)
