"""The engineer's changes to the kernel, which bind the agents: a proposal that undoes one is a
revert, flagged in its diff summary; the engine asks the engineer about it in HITL and, in Auto,
keeps it only when its verdict beats that of the engineer's version (steps.py). A change the
engineer lets go (approving a revert) no longer binds. Rebuilt on resume by replaying the steps
that took the changes. No jax here."""

from __future__ import annotations

from dataclasses import dataclass, field

from maxkernel_tui.agents.orchestration import diffs

SHOWN_LINES = 2  # lines of a revert named in its flag
FEEDBACK_LINES = 40  # lines of an engineer's diff quoted to the agents


def _lines(source: str) -> set[str]:
    """The source's meaningful lines, stripped: layout and comments are not the engineer's
    change."""
    return {s for line in source.splitlines() if (s := line.strip()) and not s.startswith("#")}


@dataclass
class EngineerEdit:
    step: str  # where the engineer's change was taken
    before: str  # the kernel the engineer changed (the agent's proposal, or the current one)
    after: str  # the engineer's kernel
    version_id: int | None = None  # its kernel version, once stored
    number: int = 0  # its v-number, once stored
    added: set[str] = field(init=False)
    removed: set[str] = field(init=False)

    def __post_init__(self) -> None:
        old, new = _lines(self.before), _lines(self.after)
        self.added, self.removed = new - old, old - new

    def undone_by(self, source: str) -> list[str]:
        """The lines of this change that `source` undoes ([] when it keeps the change): a line
        the engineer removed that comes back, or every line the engineer added gone."""
        lines = _lines(source)
        restored = sorted(self.removed & lines)
        dropped = sorted(self.added - lines)
        if restored:
            return restored
        return dropped if self.added and len(dropped) == len(self.added) else []

    def name(self) -> str:
        return f"v{self.number}" if self.number else f"the edit at {self.step}"

    def feedback(self) -> str:
        """What the agents are told of the change: keep it."""
        diff = diffs.unified(self.before, self.after, "before", "the engineer's").splitlines()
        shown = "\n".join(diff[:FEEDBACK_LINES])
        return (
            f"the engineer changed the kernel ({self.name()}); keep these changes, do not undo "
            f"them:\n{shown}"
        )


@dataclass(frozen=True)
class Revert:
    edit: EngineerEdit
    lines: list[str]

    def words(self) -> str:
        shown = "; ".join(f"`{line}`" for line in self.lines[:SHOWN_LINES])
        more = f" and {len(self.lines) - SHOWN_LINES} more" if len(self.lines) > SHOWN_LINES else ""
        return f"reverts the engineer's change ({self.edit.name()}): {shown}{more}"


class EngineerEdits:
    def __init__(self) -> None:
        self.edits: list[EngineerEdit] = []

    def add(self, edit: EngineerEdit) -> None:
        if edit.added or edit.removed:  # an "edit" that changes nothing binds nothing
            self.edits.append(edit)

    def stored(self, source: str, version_id: int, number: int) -> None:
        """`source` became a kernel version: an edit of it now has its version."""
        for edit in self.edits:
            if edit.version_id is None and edit.after == source:
                edit.version_id, edit.number = version_id, number

    def reverted_by(self, source: str) -> Revert | None:
        """The latest of the engineer's changes that `source` undoes, if any."""
        for edit in reversed(self.edits):
            if lines := edit.undone_by(source):
                return Revert(edit, lines)
        return None

    def let_go(self, edit: EngineerEdit) -> None:
        """The engineer approved a revert of it, or it lost to a better kernel: it binds no more."""
        self.edits = [kept for kept in self.edits if kept is not edit]
