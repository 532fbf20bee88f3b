"""The proposal view of a port: the engineer's review of the porter's JAX reference when no
comparison with PyTorch can decide (the file has no PyTorch harness, or torch is absent). The
source file and the reference side by side, read-only, with approve and reject keys. No jax.

`approve_in_app(app)` is the porter's `Approve` for the workbench: it is called from the import's
thread worker, shows this screen on the app's event loop and blocks that thread (never the UI)
until a key answers.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Label, Static

from maxkernel_tui.screens.editors import highlighted
from maxkernel_tui.visible import visible

if TYPE_CHECKING:  # the agents (and their model clients) load when an import first runs
    from maxkernel_tui.agents.porting import Approve, Review

_LANGUAGES = {".py": "python", ".cu": "cpp", ".cuh": "cpp", ".cpp": "cpp", ".cc": "cpp"}


class PortReviewScreen(ModalScreen[bool]):
    """Dismissed with True (write the task) or False (nothing written); `answer` holds the same
    for a thread that waits on it, and is False if the screen goes away unanswered (the app
    quit), so that no thread waits forever."""

    CSS_PATH = "port_review.tcss"
    # priority: the keys answer even while a pane (a TextArea, for scrolling) has the focus
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "answer(True)", "Approve: write the task", priority=True),
        Binding("r,escape", "answer(False)", "Reject", priority=True),
    ]

    def __init__(self, review: Review) -> None:
        super().__init__()
        self.review = review
        self.answer: Future[bool] = Future()

    def compose(self) -> ComposeResult:
        with Vertical(id="review"):
            yield Static(
                visible(
                    f"The porter's JAX reference for {self.review.path.name} needs your "
                    f"approval: {self.review.reason}"
                ),
                id="reason",
                markup=False,
            )
            with Horizontal(id="panes"):
                yield _pane(
                    "source-pane",
                    self.review.path.name,
                    self.review.source,
                    _LANGUAGES.get(self.review.path.suffix),
                )
                yield _pane("reference-pane", "reference.py", self.review.reference, "python")
            yield Footer()

    def action_answer(self, approved: bool) -> None:
        if not self.answer.done():
            self.answer.set_result(approved)
        self.dismiss(approved)

    def on_unmount(self) -> None:
        if not self.answer.done():
            self.answer.set_result(False)


def _pane(pane_id: str, title: str, text: str, language: str | None) -> Vertical:
    return Vertical(
        Label(title, classes="pane-title", markup=False),
        highlighted(visible(text), language, read_only=True, show_line_numbers=True),
        id=pane_id,
        classes="pane",
    )


def approve_in_app(app: App[Any]) -> Approve:
    """The porter's approval through `PortReviewScreen` on `app`; call it from a thread worker
    (it waits for the engineer's key)."""

    def approve(review: Review) -> bool:
        screen = PortReviewScreen(review)
        app.call_from_thread(app.push_screen, screen)
        return screen.answer.result()

    return approve
