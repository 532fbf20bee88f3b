"""The workbench's evidence: a kernel proposal is judged as soon as it waits (draft-ahead), its
verdict shown with it, and the evidence card of the proposal (c while it waits, or f7) or of the
version in the source pane (f7) is one key away, its portability matrix one more (p). A mixin of
the workbench screen: the session does the work (services/workbench_session.py), this turns
keys into it. Never imports jax."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.screen import Screen

from maxkernel_tui.agents.orchestration.gates import Proposal, Subject

if TYPE_CHECKING:
    from maxkernel_tui.screens.agent_pane import AgentPane
    from maxkernel_tui.screens.source_pane import SourcePane
    from maxkernel_tui.services.workbench_session import WorkbenchSession


class ShowsEvidence(Screen[None]):
    """The workbench's base: the workbench gives the session and the panes."""

    @property
    def session(self) -> WorkbenchSession:
        raise NotImplementedError

    @property
    def agents(self) -> AgentPane:
        raise NotImplementedError

    @property
    def source(self) -> SourcePane:
        raise NotImplementedError

    def judge_ahead(self) -> None:
        """Judge the waiting kernel proposal now, before the engineer's key."""
        proposal = self.session.pending
        if (
            proposal is None
            or proposal.subject != Subject.KERNEL
            or proposal.nothing_new
            or not proposal.content.strip()
        ):
            return
        self.agents.show_draft("judging it ahead of your decision …")
        self.run_worker(
            self._judge_ahead(proposal), group="draft", exclusive=True, exit_on_error=False
        )

    async def _judge_ahead(self, proposal: Proposal) -> None:
        report = await self.session.draft(proposal.content)
        if self.session.pending is proposal:  # not decided meanwhile
            self.agents.show_draft(f"judged ahead: {report.verdict_line} (f7 its card)")

    def action_card(self) -> None:
        """The evidence card of the waiting proposal, else of the version in the source pane."""
        from maxkernel_tui.screens.evidence_card import EvidenceCardScreen

        proposal = self.session.pending
        if proposal is not None and proposal.subject == Subject.KERNEL:
            card, source = self.session.proposal_card(proposal), proposal.content
        else:
            found = self.session.version_card(self.source.version)
            if found is None:
                self.notify("no kernel version of this session in the source pane yet")
                return
            card, source = found
        self.app.push_screen(EvidenceCardScreen(card, source, self.session.portability))
