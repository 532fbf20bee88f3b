"""One search expansion, on the session's step primitives: the implementer applies a strategy to
a parent kernel, the debugger fixes what the harness rejects, an accepted kernel is profiled.
Its steps are keyed under the node (`n3/implement`, `n3/debug1`, `n3/profile`), so a resumed
search reuses them. No jax here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from maxkernel_tui.agents.orchestration import keys
from maxkernel_tui.agents.orchestration.gates import Subject
from maxkernel_tui.agents.orchestration.report_text import failure_text
from maxkernel_tui.agents.orchestration.steps import Steps
from maxkernel_tui.agents.roles.prompts import IMPLEMENTER
from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.agents.search.headroom import ModelView, model_view
from maxkernel_tui.kernels.report.checks import ACCEPTED, REJECTED, EvalReport
from maxkernel_tui.kernels.report.status import Verdict


@dataclass(frozen=True)
class Expansion:
    """What one search expansion produced: the last kernel version and how it fared."""

    version_id: int
    source: str
    verdict: Verdict
    score: float | None  # None when rejected or not scored
    score_kind: str
    failure: str | None
    evidence: tuple[str, ...] = ()  # what the verdict rests on (EvalReport.evidence)
    scope: str = ""  # an accepted verdict's shapes (EvalReport.scope)
    model: ModelView | None = None  # the performance model's estimate of an accepted kernel
    score_also: str = ""  # the other speedup over XLA, labelled (scoring.Score.also)


@dataclass(frozen=True)
class Duplicate:
    """The implementer wrote a kernel the graph already has (node `twin`): nothing was evaluated."""

    twin: str
    source: str


def node_steps(node: str, max_debug_attempts: int) -> list[str]:
    """The keys of every step of `node`'s expansion that can ask a model or evaluate."""
    implement, hand = keys.node_step(node, "implement"), keys.node_step(node, "hand")
    return [implement, hand] + [keys.debug(node, k) for k in range(1, max_debug_attempts + 1)]


async def expand(
    steps: Steps,
    node: str,
    parent: str,
    plan: str,
    instruction: str,
    *,
    strategy: str = "",
    claim: Callable[[str], str | None] = lambda source: None,
) -> Expansion | Duplicate:
    """Expand `node` from `parent` (a kernel's source, "" for none) and its `plan`, applying
    `strategy` (its `instruction` is what the implementer reads); `steps` is a fresh line of work
    of the search's session. `claim(source)` names the node that already has the implementer's
    kernel, if one does: the expansion then stops before anything is evaluated."""
    steps.kernel, steps.plan, steps.feedback = parent or None, plan, [instruction]
    steps.version_id, steps.strategy = None, strategy or None
    implement = keys.node_step(node, "implement")
    source = await steps.propose(implement, IMPLEMENTER, Subject.KERNEL, steps.parse_kernel, parent)
    if (twin := claim(source)) is not None:
        return Duplicate(twin, source)
    report = await steps.new_version(implement, source, IMPLEMENTER)
    report = await steps.debug(node, report, [])
    return await _judged(steps, node, report)


async def by_hand(steps: Steps, node: str, parent: str, source: str) -> Expansion:
    """`node`'s kernel is `source`, written by the engineer from `parent`: judged as the
    implementer's would be (evaluated, profiled when accepted), and never changed by a model."""
    steps.kernel, steps.plan, steps.feedback = parent or None, "a kernel written by hand", []
    steps.version_id, steps.strategy = None, None
    report = await steps.new_version(keys.node_step(node, "hand"), source, Role.ENGINE)
    return await _judged(steps, node, report)


async def _judged(steps: Steps, node: str, report: EvalReport) -> Expansion:
    """The node's expansion once its kernel is judged: rejected with why, or profiled."""
    assert steps.kernel is not None and steps.version_id is not None
    evidence = tuple(report.evidence)
    if report.verdict != ACCEPTED:
        failure = failure_text(report)
        return Expansion(steps.version_id, steps.kernel, REJECTED, None, "", failure, evidence)
    profile = keys.node_step(node, "profile")
    score, _ = await steps.profile(profile, steps.kernel, steps.version_id, report)
    return Expansion(
        steps.version_id,
        steps.kernel,
        ACCEPTED,
        score.value,
        score.kind,
        None,
        evidence,
        report.scope,
        model_view(steps.last_profile[0], steps.tools.target),
        score.also,
    )
