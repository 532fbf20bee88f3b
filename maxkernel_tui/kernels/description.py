"""A task's description as data: the shapes of every configuration and the reference's XLA cost
at production shapes. No jax here: the describe worker writes it (one JSON line per task), the
catalog caches that JSON, and the listing, the task picker and the prompts read it back through
`TaskDescription.from_json` (the codec's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from maxkernel_tui.codec import JsonData, Shape, Unknown


@dataclass(frozen=True)
class TensorSpec(JsonData):
    shape: list[int]
    dtype: str


@dataclass(frozen=True)
class ConfigShapes(JsonData, shape=Shape(omit_none=True, unknown=Unknown.IGNORE)):
    """Inputs, static arguments and outputs of the reference on one configuration."""

    inputs: list[TensorSpec]
    static: list[Any]
    outputs: list[TensorSpec]
    # A derived configuration is validated by running the reference on it (finite outputs):
    # wall times measured on this machine's CPU of making its inputs (the task's get_inputs,
    # eager) and of the reference's first run on them (compile included).
    reference_seconds: float | None = None
    inputs_seconds: float | None = None


@dataclass(frozen=True)
class DidNotFit:
    """A TPU generation whose HBM the reference did not fit in, and the compiler's words."""

    target: str
    reason: str


@dataclass(frozen=True)
class XlaCost(
    JsonData, shape=Shape(alone="error", omit_none=("relayouts",), unknown=Unknown.IGNORE)
):
    """XLA's cost analysis of the reference compiled ahead of time (figures are XLA's estimates),
    or why it could not be compiled (`error`). Read back from a listing too, whose labels
    (`kind`, `source`) are dropped."""

    config: str | None = None
    target: str | None = None  # the first generation it fit in
    compile_seconds: float | None = None
    flops: float | None = None
    bytes_accessed: float | None = None
    optimal_seconds: float | None = None
    did_not_fit: list[DidNotFit] = field(default_factory=list)
    libtpu: str | None = None
    error: str | None = None
    transcendentals: float | None = None  # counted from the jaxpr (the TPU's analysis has none)
    relayouts: list[int] | None = None  # [read, written] by copies into another layout


# The worker's answer and the catalog's cache entry (keys only where known); a worker's failure
# is its error beside the folder.
_DESCRIPTION = Shape(
    alone="error",
    beside=("folder", "format", "task_id"),
    omit_none=("task_id", "cost", "declared_flops"),
    omit_empty=("tie_groups",),
    unknown=Unknown.IGNORE,
)


@dataclass(frozen=True)
class TaskDescription(JsonData, shape=_DESCRIPTION):
    """What the describe worker found about one task folder, or why it could not (`error`)."""

    folder: str = ""
    format: int | None = None  # of the worker's answer (catalog.FORMAT_VERSION)
    task_id: str | None = None
    configs: dict[str, ConfigShapes] = field(default_factory=dict)
    cost: XlaCost | None = None  # None when asked for shapes only
    error: str | None = None
    declared_flops: float | None = None  # the task's own get_flops() (JAXBench), if any
    # A derived or imported task's sizes of one production value split into those that must
    # move together, found by tracing the reference (tie_probe.py) where asked (`tasks import`)
    tie_groups: list[list[str]] = field(default_factory=list)

    @property
    def cacheable(self) -> bool:
        """Complete: neither the task nor the cost failed (a failure is tried again next time)."""
        return self.error is None and (self.cost is None or self.cost.error is None)
