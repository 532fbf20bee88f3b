"""Walking a program's jaxpr: every equation, through the jaxprs nested in equations (jit, cond
branches, scan and while bodies, custom derivatives, nested calls), with how often it runs and
which branches it sits under. One walk serves the programs (the `pallas_call`s they hold) and
the kernel bodies (what one grid step does); the work rules (evaluation/work/) and the model
(perf/pallas_analysis.py) each keep only what they compute per equation. Imports jax."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jax.extend import core

# A cond branch an equation sits under: (the cond's number in the walk, the branch's index).
Branch = tuple[int, int]


@dataclass(frozen=True)
class Site:
    """One equation where the walk found it."""

    eqn: core.JaxprEqn
    number: int  # its place in the walk (depth first, an equation before what it holds)
    # runs per run of the walked jaxpr: the product of the enclosing scans' lengths (a while
    # loop's body counts once)
    times: int
    exact: bool  # False under a while loop, whose trip count is data
    branches: tuple[Branch, ...]  # the cond branches it sits under, outermost first
    within: tuple[str, ...]  # the primitives of the equations that hold it, outermost first

    @property
    def name(self) -> str:
        return str(self.eqn.primitive.name)

    @property
    def conditional(self) -> bool:
        """Under a cond branch (`lax.cond`, `pl.when`): it may not run."""
        return bool(self.branches)


def sub_jaxprs(params: dict[str, Any]) -> list[core.Jaxpr]:
    """The jaxprs nested in an equation's parameters (jit, cond branches, scan and while bodies)."""
    found = []
    for value in params.values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, core.ClosedJaxpr):
                found.append(item.jaxpr)
            elif isinstance(item, core.Jaxpr):
                found.append(item)
    return found


def walk(jaxpr: core.Jaxpr) -> Iterator[Site]:
    """Every equation of `jaxpr` and of the jaxprs nested in it, depth first. A `pallas_call`'s
    body is not entered: it runs per grid step, walked on its own (`walk(eqn.params["jaxpr"])`)."""
    return _walk(jaxpr, _Context(1, True, (), ()), itertools.count())


def pallas_calls(jaxpr: core.Jaxpr) -> list[Site]:
    """Every `pallas_call` of a program, in order."""
    return [site for site in walk(jaxpr) if site.name == "pallas_call"]


@dataclass(frozen=True)
class _Context:
    times: int
    exact: bool
    branches: tuple[Branch, ...]
    within: tuple[str, ...]


def _walk(jaxpr: core.Jaxpr, context: _Context, numbers: Iterator[int]) -> Iterator[Site]:
    for eqn in jaxpr.eqns:
        site = Site(
            eqn, next(numbers), context.times, context.exact, context.branches, context.within
        )
        yield site
        name = site.name
        if name == "pallas_call":
            continue
        within = (*context.within, name)
        if name == "cond":
            for index, branch in enumerate(eqn.params["branches"]):
                inner = _Context(
                    context.times, context.exact, (*context.branches, (site.number, index)), within
                )
                yield from _walk(branch.jaxpr, inner, numbers)
            continue
        times = context.times * int(eqn.params["length"]) if name == "scan" else context.times
        inner = _Context(times, context.exact and name != "while", context.branches, within)
        for sub in sub_jaxprs(eqn.params):
            yield from _walk(sub, inner, numbers)
