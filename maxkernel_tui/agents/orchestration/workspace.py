"""The session's directory: the only place the engine writes files (kernel versions, traces)."""

from __future__ import annotations

from pathlib import Path

from maxkernel_tui.kernels.service.service import KernelSource


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        """A path inside the session's directory; anything that would leave it is refused."""
        target = (self.root / name).resolve()
        if not target.is_relative_to(self.root):
            raise PermissionError(f"{name!r} is outside the session's directory {self.root}")
        return target

    def write(self, name: str, text: str) -> Path:
        target = self.path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        return target

    def kept(self, name: str, source: str) -> KernelSource:
        """`source` as the tools take it (text), kept here as `name` too for the engineer."""
        return KernelSource(source, self.write(name, source).name)
