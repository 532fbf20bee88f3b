"""A task's derived configurations, decided statically from its input code. No jax.

`plan_derivation` reads the sizes the input builder is built from (derive/sites.py), derives
`check` and `heldout` (derive/rules.py) and says what it could not derive. The plan is a pure
function of the source, so every process that loads the task (the UI, the candidate's worker,
the reference's) derives the same configurations without talking to the others.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from maxkernel_tui.kernels.config_names import BENCH, CHECK, HELDOUT
from maxkernel_tui.kernels.derive.rules import derive_sizes
from maxkernel_tui.kernels.derive.sites import SiteKind, SizeSite, find_sites, literal_name


@dataclass(frozen=True)
class Derivation:
    """How `check` and `heldout` come from the production sizes; `fallback` says why a task
    keeps only its production shapes."""

    builder: str  # the input function: get_inputs (plain) or create_inputs (JAXBench)
    sites: tuple[SizeSite, ...] = ()
    sizes: dict[str, dict[str, int]] = field(default_factory=dict)  # config -> name -> size
    ties: tuple[str, ...] = ()  # "context = pages x page_size", in words
    keys: int = 0  # fixed PRNG keys replaced by the run's seed
    notes: tuple[str, ...] = ()  # what stays at production size, and why
    fallback: str | None = None
    # which sizes of one production value move together, as tracing the reference told
    # (tie_probe.py); empty: every size of a value moves with the others
    groups: tuple[tuple[str, ...], ...] = ()

    @property
    def derived(self) -> bool:
        return self.fallback is None

    def coinciding(self) -> bool:
        """Whether two sizes of different names share a production value: only then can
        tracing the reference (which of them it ties) change the held-out sizes."""
        production = list(self.sizes.get(BENCH, {}).values())
        return len(set(production)) < len(production)

    def configs(self) -> tuple[str, ...]:
        return (BENCH, CHECK, HELDOUT) if self.derived else (BENCH,)

    def summary(self, config: str) -> str:
        """`M=2048 K=2048` for a derived configuration, in the order of the source."""
        sizes = self.sizes.get(config, {})
        return " ".join(f"{name}={value}" for name, value in sizes.items())

    def warnings(self) -> tuple[str, ...]:
        if self.fallback is not None:
            return (
                f"check and heldout not derived ({self.fallback}): numerics run at production "
                "shapes on the task's fixed inputs",
            )
        return self.notes


def plan_derivation(
    module: ast.Module, builder: str, groups: tuple[tuple[str, ...], ...] = ()
) -> Derivation:
    """The derived configurations of a task whose `builder` makes production inputs only;
    `groups`: which equal sizes the reference ties, where tracing it told (tie_probe.py)."""
    try:
        sites = find_sites(module, builder)
    except ValueError as error:
        return Derivation(builder, fallback=str(error))
    sizes = _unique(sites.sizes)
    if not sizes:
        return Derivation(
            builder,
            fallback=f"`{builder}` writes no size: no named integer, dict entry or shape literal",
        )
    production = {s.name: s.value for s in sizes}
    twins = {
        s.name: literal_name(s.value)
        for s in sizes
        if s.kind == SiteKind.LITERAL and s.name != literal_name(s.value)
    }
    derived = derive_sizes(production, sites.shapes, sites.divisors, groups, twins)
    if derived.heldout == derived.check:
        return Derivation(
            builder,
            sizes=_configs(production, derived.check, derived.check),
            fallback=derived.problems[-1],
        )
    return Derivation(
        builder,
        sites=sizes,
        sizes=_configs(production, derived.check, derived.heldout),
        ties=tuple(f"{t.total} = {t.free} x {t.other}" for t in derived.ties),
        keys=sites.keys,
        notes=sites.notes + derived.problems,
        groups=groups,
    )


def _configs(
    production: dict[str, int], check: dict[str, int], heldout: dict[str, int]
) -> dict[str, dict[str, int]]:
    return {BENCH: dict(production), CHECK: dict(check), HELDOUT: dict(heldout)}


def _unique(sites: tuple[SizeSite, ...]) -> tuple[SizeSite, ...]:
    seen: dict[str, SizeSite] = {}
    for site in sites:
        seen.setdefault(site.name, site)
    return tuple(seen.values())
