"""How a search runs: its algorithm and shape, its caps and its concurrency. Stored with the
search's root node, so that `--resume` continues with the same settings."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

ALGORITHMS = ("parallel", "beam", "evolve")


@dataclass(frozen=True)
class SearchConfig:
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
    llm_concurrency: int = 2
    eval_concurrency: int = 1  # evaluations are the scarce resource (one TPU, one harness)
    debug_attempts: int = 1  # debugger fixes per expansion

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
        if self.max_evals is not None and self.max_evals < 1:
            raise ValueError("max-evals must be at least 1")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class StoredSearch:
    """What a search's root node keeps of it (its `extra`): the settings and the seed kernel."""

    config: SearchConfig
    seed: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config.to_json(), "seed": self.seed}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredSearch | None:
        """None when `data` is not a search's (a session that is not a graph search)."""
        config = data.get("config")
        if not isinstance(config, dict):
            return None
        return cls(SearchConfig.from_json(config), str(data.get("seed") or ""))
