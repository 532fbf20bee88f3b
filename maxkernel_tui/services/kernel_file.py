"""The workbench's kernel file (`workbench/<task>/kernel.py` in the data directory). The
engineer's own save (ctrl+s) writes it from the editor; every other write (an agent's version,
the best kernel when Auto or a search ends, f6, a resumed session, a promoted search node) goes
through `replace_kernel`, which first keeps what the file holds as a kernel version of the
session whose kernel comes in, unless that session already has it: nothing the engineer saved
or promoted is overwritten without a version to go back to. No jax, no Textual."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from maxkernel_tui.store.db import Store
from maxkernel_tui.store.rows import KernelVersion

KEPT_PLAN = "the workbench's kernel.py as it was before {why}: kept so that f6 can go back to it"


@dataclass(frozen=True)
class Kept:
    """A kernel the file held, kept as a version before another replaced it."""

    version: KernelVersion

    def words(self) -> str:
        return (
            f"your kernel.py is kept as v{self.version.number} of session "
            f"{self.version.session_id} (f6 goes back to it)"
        )


def replace_kernel(store: Store, path: Path, source: str, session_id: str, why: str) -> Kept | None:
    """Make `source` the kernel file at `path`; what the file held, unless it is `source` or a
    version of session `session_id` already, is first kept as that session's next version (what
    was kept, else None). `why` names the write in the kept version's plan."""
    current = path.read_text(encoding="utf-8") if path.is_file() else None
    kept = None
    if current is not None and current != source and not store.holds_kernel(session_id, current):
        kept = Kept(store.add_kernel_version(session_id, current, KEPT_PLAN.format(why=why)))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")  # a write cut short leaves the file whole
    partial.write_text(source, encoding="utf-8")
    os.replace(partial, path)
    return kept
