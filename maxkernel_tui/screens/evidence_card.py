"""The evidence card of one candidate (a proposal, a search node, a version), over the screen it
was opened from: its checks and where each was earned, the portability matrix (p computes it:
a libtpu compile per TPU generation and the model's estimates, in worker processes), what a TPU
measured and what it cost. The card is data (services/evidence.py); this screen shows its
Markdown. Never imports jax."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown, Static

from maxkernel_tui.kernels.service.portability import GENERATIONS, PortabilityRow
from maxkernel_tui.services.evidence import EvidenceCard

# The matrix of a kernel's source: compiled and estimated on every generation (slow: seconds
# per generation), by whoever owns the evaluation service (the workbench's session).
Portability = Callable[[str], Awaitable[list[PortabilityRow]]]


class EvidenceCardScreen(ModalScreen[None]):
    CSS_PATH = "evidence_card.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("p", "portability", "Portability matrix"),
    ]

    def __init__(self, card: EvidenceCard, source: str, portability: Portability | None) -> None:
        super().__init__()
        self.card, self._source, self._portability = card, source, portability

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="card-box"):
            yield Markdown(self.card.to_markdown(), id="card")
        yield Static(self._hint(), id="card-hint", markup=False)

    def on_mount(self) -> None:
        self.query_one("#card-box").border_title = "Evidence card"
        self.query_one("#card-box").focus()

    def _hint(self) -> str:
        if self.card.portability:
            return "escape closes"
        if self._portability is None or not self._source:
            return "escape closes · the portability matrix is computed from the workbench"
        return f"p compiles and estimates it on {', '.join(GENERATIONS)} · escape closes"

    def action_portability(self) -> None:
        if self._portability is None or not self._source or self.card.portability:
            return
        self.query_one("#card-hint", Static).update(
            f"compiling for {', '.join(GENERATIONS)} with libtpu and estimating …"
        )
        self.run_worker(self._compute(), group="portability", exclusive=True)

    async def _compute(self) -> None:
        assert self._portability is not None
        rows = await self._portability(self._source)
        self.show(self.card.with_portability(rows))

    def show(self, card: EvidenceCard) -> None:
        self.card = card
        self.query_one("#card", Markdown).update(card.to_markdown())
        self.query_one("#card-hint", Static).update(self._hint())
