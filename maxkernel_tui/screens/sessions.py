"""Sessions: the sessions in the store, to resume one in the workbench or export its best kernel.

The rows and the export are the `sessions` and `export` commands' own (services/sessions.py,
services/export.py): the screen and the CLI cannot disagree about a session."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from maxkernel_tui.screens.messages import ResumeRequested
from maxkernel_tui.screens.plain import plain
from maxkernel_tui.services.export import export_session
from maxkernel_tui.services.sessions import (
    SESSION_HEADER,
    existing_store,
    list_summaries,
    session_cells,
)
from maxkernel_tui.store.kinds import StoreError
from maxkernel_tui.visible import visible


class SessionsScreen(Screen[None]):
    CSS_PATH = "sessions.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        # priority: the table would take enter itself; from the filter box enter resumes the top
        # match
        Binding("enter", "resume", "Resume", priority=True),
        Binding("e", "export", "Export"),
        Binding("slash", "filter", "Filter"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, store_path: Path, export_dir: Path) -> None:
        super().__init__()
        self._store_path = store_path
        self._export_dir = export_dir
        self._rows: list[tuple[str, ...]] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="filter: words in id, task, mode or status", id="filter")
        yield DataTable(id="sessions", cursor_type="row", zebra_stripes=True)
        yield Static(id="status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "sessions"
        self.query_one("#filter", Input).display = False
        table = self.query_one("#sessions", DataTable)
        table.add_columns(*SESSION_HEADER)
        self._rows = [session_cells(s) for s in list_summaries(self._store_path)]
        self._show_rows("")
        if not self._rows:
            self._status(f"no sessions yet (store: {self._store_path})")
        else:
            count = f"{len(self._rows)} session{'s' if len(self._rows) > 1 else ''}"
            self._status(
                f"{count} · enter resumes in the workbench · e exports the best kernel · / filters"
            )
        table.focus()

    def _show_rows(self, query: str) -> None:
        words = query.lower().split()
        table = self.query_one("#sessions", DataTable)
        table.clear()
        for cells in self._rows:
            haystack = " ".join(cells[:4]).lower()  # id, task, mode, status
            if all(word in haystack for word in words):
                table.add_row(*(plain(cell) for cell in cells), key=cells[0])

    def _selected(self) -> str | None:
        table = self.query_one("#sessions", DataTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def on_input_changed(self, event: Input.Changed) -> None:
        self._show_rows(event.value)

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def action_back(self) -> None:
        box = self.query_one("#filter", Input)
        if box.display:  # the first escape leaves the filter, the second the screen
            box.value = ""
            box.display = False
            self.query_one("#sessions", DataTable).focus()
            return
        self.dismiss()

    def action_resume(self) -> None:
        session_id = self._selected()
        if session_id is None:
            self.notify("no session to resume", severity="warning")
            return
        self.post_message(ResumeRequested(session_id))

    def action_export(self) -> None:
        session_id = self._selected()
        store = existing_store(self._store_path)
        if session_id is None or store is None:
            self.notify("no session to export", severity="warning")
            return
        out = self._export_dir / session_id
        try:
            with store:
                written = export_session(store, session_id, out)
        except (StoreError, OSError) as error:
            self.notify(visible(str(error)), title="export failed", severity="error", markup=False)
            return
        self._status(f"exported {session_id}: " + ", ".join(str(p) for p in written))
        self.notify(f"written to {out}", title=f"exported {session_id}")

    def _status(self, text: str) -> None:
        self.query_one("#status", Static).update(visible(text))
