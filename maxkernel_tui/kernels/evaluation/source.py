"""A kernel as an evaluation or a profile takes it (`KernelSource`): its source text and the name
reports give it, read once where it enters (a file named on the command line, the editor, an
agent's answer). Workers get the text, written into their private directory; nobody is sent a
path to the user's file, and nobody reads it again. No jax here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from maxkernel_tui.kernels.limits import file_oversize_problem, text_oversize_problem
from maxkernel_tui.kernels.report.checks import FAIL, Check
from maxkernel_tui.kernels.report.reasons import Problems, Reason, RuleBroken, Said, StaticRule
from maxkernel_tui.kernels.report.status import CheckName
from maxkernel_tui.kernels.snapshot import TaskSnapshot

DEFAULT_NAME = "kernel.py"


@dataclass(frozen=True)
class KernelSource:
    """`text`: the kernel's source; `name`: what reports call it (a file name). `too_large`,
    `unreadable`: why the file it was to be read from was not read: the static check rejects
    it for that, and nothing else runs."""

    text: str
    name: str = DEFAULT_NAME
    too_large: str | None = None
    unreadable: str | None = None

    @classmethod
    def read(cls, path: Path) -> KernelSource:
        """The file's source, read now (a file over the size limit is not read at all)."""
        if too_large := file_oversize_problem(path, path.name):
            return cls("", path.name, too_large=too_large)
        try:
            return cls(path.read_text(encoding="utf-8"), path.name)
        except (OSError, UnicodeDecodeError) as error:
            return cls("", path.name, unreadable=f"{path}: {error}")

    @property
    def problem(self) -> str | None:
        """Why this kernel is refused before anything parses it, in words (None: it is not)."""
        refusal = self.refusal
        return None if refusal is None else refusal.detail

    @property
    def refusal(self) -> Check | None:
        """The static check that refuses this kernel before anything parses it (unread, or too
        large); None when it may be parsed."""
        if self.unreadable is not None:
            return Check(CheckName.STATIC, FAIL, Reason.SOURCE_UNREADABLE, Said(self.unreadable))
        if too_large := self.too_large or text_oversize_problem(self.text, self.name):
            broken = Problems((RuleBroken(StaticRule.TOO_LARGE, too_large),))
            return Check(CheckName.STATIC, FAIL, Reason.STATIC_RULES_BROKEN, broken)
        return None

    def is_expert(self, snapshot: TaskSnapshot) -> bool:
        """The kernel is the task's own expert baseline: the same text as the expert's file
        (read from the snapshot, where the task folder holds it)."""
        expert = snapshot.task.expert_path
        if expert is None:
            return False
        try:
            return expert.read_text(encoding="utf-8") == self.text
        except (OSError, UnicodeDecodeError):
            return False
