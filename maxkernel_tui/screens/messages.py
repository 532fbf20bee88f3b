"""What the screens ask of the app, as posted messages the app handles in one place: open a task
in the workbench, resume a session, promote a search node's kernel, take saved settings. No jax."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.message import Message

from maxkernel_tui.kernels.task import Task


class TaskChosen(Message):
    """The engineer chose a task: open it in the workbench."""

    def __init__(self, task: Task) -> None:
        super().__init__()
        self.task = task


class ResumeRequested(Message):
    """Reopen a stored session (an id or unique prefix) in the workbench."""

    def __init__(self, session_id: str) -> None:
        super().__init__()
        self.session_id = session_id


class KernelPromoted(Message):
    """A kernel goes to the workbench (back to HITL on it), e.g. a search node's: a version of
    session `session_id`; `origin` says whose it is in the note."""

    def __init__(self, task: Task, source: str, origin: str, session_id: str) -> None:
        super().__init__()
        self.task, self.source, self.origin = task, source, origin
        self.session_id = session_id


class SettingsSaved(Message):
    """Settings just saved to the config file, by name (None: unset); `path` is that file."""

    def __init__(self, changed: dict[str, Any], path: Path) -> None:
        super().__init__()
        self.changed, self.path = changed, path
