"""How a search runs: its algorithm and shape, its caps and its concurrency. Stored with the
search's root node, so that `--resume` continues with the same settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from maxkernel_tui.codec import JsonData, Shape, Unknown
from maxkernel_tui.kernels.perf.vs_xla import XlaBaseline

ALGORITHMS = ("parallel", "beam", "evolve")


@dataclass(frozen=True)
class SearchConfig(JsonData, shape=Shape(unknown=Unknown.IGNORE)):
    algorithm: str = "beam"
    width: int = 3  # parallel: independent lines; beam: beam width
    depth: int = 3  # rounds after the root (generations for evolve)
    branches: int = 2  # beam: children per beam node
    population: int = 6  # evolve: offspring per generation over all islands
    islands: int = 2  # evolve
    max_evals: int | None = None  # harness evaluations over the whole search
    regression_tolerance: float = (
        0.0  # beam: a child may be this much (relative) worse than its parent
    )
    # beam: a kernel whose estimate reaches this share of the roofline is not expanded (the model
    # sees no headroom); 1.0 or more expands every kernel
    headroom_floor: float = 0.95
    llm_concurrency: int = 2
    eval_concurrency: int = 1  # evaluations are the scarce resource (one TPU, one harness)
    debug_attempts: int = 1  # debugger fixes per expansion
    # which estimated speedup over XLA nodes are ranked by (perf/vs_xla.py)
    rank_by: XlaBaseline = XlaBaseline.TOLERANCE

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(
                f"unknown algorithm {self.algorithm!r}; choose from {', '.join(ALGORITHMS)}"
            )
        for name in (
            "width",
            "depth",
            "branches",
            "population",
            "islands",
            "llm_concurrency",
            "eval_concurrency",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', '-')} must be at least 1")
        if self.headroom_floor <= 0:
            raise ValueError("headroom-floor must be above 0")
        if self.max_evals is not None and self.max_evals < 1:
            raise ValueError("max-evals must be at least 1")


@dataclass(frozen=True)
class StoredSearch(JsonData, shape=Shape(unknown=Unknown.IGNORE)):
    """What a search's root node keeps of it (its `extra`): the settings and the seed kernel."""

    config: SearchConfig
    seed: str = ""


def stored_search(extra: dict[str, Any]) -> StoredSearch | None:
    """A root node's `extra` read as a search's; None when it is not one (a session that is not
    a graph search)."""
    return StoredSearch.from_json(extra) if isinstance(extra.get("config"), dict) else None
