"""Help: every key binding of the screen it was opened from, read from the bindings themselves
(the screen's, the focused widget's and the app's), so it cannot drift from what the keys do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Static


@dataclass(frozen=True)
class KeyHelp:
    key: str  # as the footer shows it, e.g. "^e"
    description: str
    where: str  # the app, the screen, or the widget that owns the binding
    enabled: bool


def key_help(app: App[Any], screen: Screen[Any]) -> list[KeyHelp]:
    """The bindings active on `screen` now, hidden ones included, screen's own first."""
    rows = []
    for key, active in screen.active_bindings.items():
        binding = active.binding
        node = active.node
        where = "app" if node is app else "screen" if node is screen else type(node).__name__
        description = binding.description or binding.tooltip or _action_words(binding)
        rows.append(
            KeyHelp(app.get_key_display(binding) or key, description, where, active.enabled)
        )
    order = {"screen": 0, "app": 2}
    return sorted(
        rows, key=lambda r: (order.get(r.where, 1), r.where)
    )  # stable: keeps binding order


def _action_words(binding: Binding) -> str:
    return binding.action.split(".")[-1].split("(")[0].replace("_", " ")


class HelpScreen(ModalScreen[None]):
    CSS_PATH = "help.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,f1,q,question_mark", "dismiss", "Close help")
    ]

    def __init__(self, title: str, keys: list[KeyHelp]) -> None:
        super().__init__()
        self._title = title
        self._keys = keys

    def compose(self) -> ComposeResult:
        with Vertical(id="help"):
            yield DataTable(id="keys", cursor_type="row", zebra_stripes=True)
            yield Static(
                "escape closes · keys shown dim are not available right now",
                id="hint",
                markup=False,
            )

    def on_mount(self) -> None:
        self.query_one("#help").border_title = f"Keys: {self._title}"
        table = self.query_one("#keys", DataTable)
        table.add_columns("key", "does", "from")
        for row in self._keys:
            cells = (row.key, row.description, row.where)
            table.add_row(*(Text(c, style="" if row.enabled else "dim") for c in cells))
        table.focus()
