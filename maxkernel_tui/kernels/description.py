"""A task's description as data: the shapes of every configuration and the reference's XLA cost
at production shapes. No jax here: the describe worker writes it (one JSON line per task), the
catalog caches that JSON, and the listing, the task picker and the prompts read it back through
`TaskDescription.from_json`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class TensorSpec:
    shape: list[int]
    dtype: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ConfigShapes:
    """Inputs, static arguments and outputs of the reference on one configuration."""

    inputs: list[TensorSpec]
    static: list[Any]
    outputs: list[TensorSpec]
    # A derived configuration is validated by running the reference on it (finite outputs):
    # wall times measured on this machine's CPU of making its inputs (the task's get_inputs,
    # eager) and of the reference's first run on them (compile included).
    reference_seconds: float | None = None
    inputs_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConfigShapes:
        return cls(
            inputs=[TensorSpec(**s) for s in data["inputs"]],
            static=list(data["static"]),
            outputs=[TensorSpec(**s) for s in data["outputs"]],
            reference_seconds=data.get("reference_seconds"),
            inputs_seconds=data.get("inputs_seconds"),
        )


@dataclass(frozen=True)
class DidNotFit:
    """A TPU generation whose HBM the reference did not fit in, and the compiler's words."""

    target: str
    reason: str


@dataclass(frozen=True)
class XlaCost:
    """XLA's cost analysis of the reference compiled ahead of time (figures are XLA's estimates),
    or why it could not be compiled (`error`)."""

    config: str | None = None
    target: str | None = None  # the first generation it fit in
    compile_seconds: float | None = None
    flops: float | None = None
    bytes_accessed: float | None = None
    optimal_seconds: float | None = None
    did_not_fit: list[DidNotFit] = field(default_factory=list)
    libtpu: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return {"error": self.error}
        return {k: v for k, v in asdict(self).items() if k != "error"}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> XlaCost:
        """Also reads a labelled cost of a listing (its `kind` and `source` are dropped)."""
        fits = [DidNotFit(**d) for d in data.get("did_not_fit", [])]
        known = {k: v for k, v in data.items() if k not in ("kind", "source", "did_not_fit")}
        return cls(**known, did_not_fit=fits)


@dataclass(frozen=True)
class TaskDescription:
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

    def to_json(self) -> dict[str, Any]:
        """The worker's answer and the catalog's cache entry (keys only where known)."""
        data: dict[str, Any] = {"folder": self.folder, "format": self.format}
        if self.task_id is not None:
            data.update(task_id=self.task_id)
        if self.error is not None:
            return dict(data, error=self.error)
        data.update(configs={name: shapes.to_json() for name, shapes in self.configs.items()})
        if self.cost is not None:
            data.update(cost=self.cost.to_json())
        if self.declared_flops is not None:
            data.update(declared_flops=self.declared_flops)
        if self.tie_groups:
            data.update(tie_groups=self.tie_groups)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskDescription:
        """The worker's answer, a cache entry, or a worker's failure (only {"error"})."""
        configs = data.get("configs") or {}
        cost = data.get("cost")
        return cls(
            folder=data.get("folder", ""),
            format=data.get("format"),
            task_id=data.get("task_id"),
            configs={name: ConfigShapes.from_json(c) for name, c in configs.items()},
            cost=None if cost is None else XlaCost.from_json(cost),
            error=data.get("error"),
            declared_flops=data.get("declared_flops"),
            tie_groups=[list(group) for group in data.get("tie_groups") or []],
        )
