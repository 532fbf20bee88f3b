"""A kernel's speedup over XLA, against both XLAs it can mean: the reference as it is written
(f32 at XLA's default precision is one bf16 MXU pass) and the reference at the precision the
task's tolerance needs (three passes where one bf16 pass leaves the tolerance at production's
depth). Both are useful, and a number without its definition is not: every surface (session
score, search, profile, eval, export, README) shows both through `VsXla`'s labels, and a
ranking says which one it ranks by (`XlaBaseline`). No jax here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from maxkernel_tui.codec import JsonData
from maxkernel_tui.kernels.report.basis import Basis

SEPARATOR = " · "
# where the MXU passes the task's tolerance needs could not be found
UNKNOWN = "vs XLA@tolerance: not known"


class XlaBaseline(StrEnum):
    """Which XLA a speedup is against; the vocabulary a session or search ranks by."""

    TOLERANCE = "tolerance"  # XLA at the MXU passes the task's tolerance needs
    AS_WRITTEN = "as-written"  # XLA running the reference as it is written


_WORDS = {XlaBaseline.TOLERANCE: "tolerance", XlaBaseline.AS_WRITTEN: "as written"}
_RANKED = {XlaBaseline.TOLERANCE: "XLA@tolerance", XlaBaseline.AS_WRITTEN: "XLA as written"}
_BASIS = {Basis.ESTIMATED: "est.", Basis.CALIBRATED: "est., calibrated", Basis.MEASURED: "measured"}


def ranked_by(baseline: XlaBaseline) -> str:
    """`ranked by XLA@tolerance`: what a session or search ranks kernels by, in a status line."""
    return f"ranked by {_RANKED[baseline]}"


@dataclass(frozen=True)
class XlaFigure(JsonData):
    """One speedup over XLA: which XLA, at how many bf16 MXU passes per matmul, how it was got
    (estimated, calibrated or measured) and where (a TPU generation or a device)."""

    baseline: XlaBaseline
    passes: int
    speedup: float | None  # XLA's time over the kernel's; None where either is unknown
    basis: Basis
    where: str

    def short(self) -> str:
        """`1.02x XLA@3-pass (tolerance)`, `0.35x XLA@1-pass (as written)`."""
        ratio = "?" if self.speedup is None else f"{self.speedup:.2f}x"
        return f"{ratio} {self._against()}"

    def kind(self) -> str:
        """What the figure is, without its value (a score's kind): `estimated speedup vs
        XLA@3-pass (tolerance) on v5e`."""
        return f"{self.basis} speedup vs {self._against()} on {self.where}"

    def place(self) -> str:
        """`est., v5e`: how and where it was got."""
        return f"{_BASIS[self.basis]}, {self.where}"

    def _against(self) -> str:
        return f"XLA@{self.passes}-pass ({_WORDS[self.baseline]})"


@dataclass(frozen=True)
class VsXla(JsonData):
    """Both speedups of one kernel on one target. `tolerance` is None where the precision the
    tolerance needs is not known (a profile that could not find it), and says so when shown."""

    as_written: XlaFigure
    tolerance: XlaFigure | None = None

    def figure(self, baseline: XlaBaseline) -> XlaFigure | None:
        return self.as_written if baseline == XlaBaseline.AS_WRITTEN else self.tolerance

    def label(self) -> str:
        """`1.02x XLA@3-pass (tolerance) · 0.35x XLA@1-pass (as written) (est., v5e)`: the
        tolerance's first; each says how and where it was got where they differ."""
        written = f"{self.as_written.short()} ({self.as_written.place()})"
        if self.tolerance is None:
            return f"{written}{SEPARATOR}{UNKNOWN}"
        if self.tolerance.place() != self.as_written.place():
            return f"{self.tolerance.short()} ({self.tolerance.place()}){SEPARATOR}{written}"
        return f"{self.short()} ({self.as_written.place()})"

    def short(self) -> str:
        """Both figures without how and where (for a table whose rows and columns say it)."""
        if self.tolerance is None:
            return f"{self.as_written.short()}{SEPARATOR}{UNKNOWN}"
        return f"{self.tolerance.short()}{SEPARATOR}{self.as_written.short()}"

    def other(self, baseline: XlaBaseline) -> str:
        """The figure a ranking by `baseline` does not use, labelled: what a score shows beside
        its own."""
        found = self.tolerance if baseline == XlaBaseline.AS_WRITTEN else self.as_written
        return UNKNOWN if found is None else f"{found.short()} ({found.place()})"
