"""Runs a search round by round: the algorithm plans a round, its nodes are created (or found,
on resume), the unfinished ones expand concurrently, one SessionEngine each (they share the
journal, the gated client and the capped tools), identical kernels are merged, and the caps are
checked before the next round. A node left running by a killed process is not final, so a
resumed search runs it again; its stored steps cost nothing the second time. The runner owns the
Graph session's status: active while it runs, then done or stopped. No jax here."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

from maxkernel_tui.agents.budget import BudgetExceeded
from maxkernel_tui.agents.llm.errors import LLMError
from maxkernel_tui.agents.orchestration import keys
from maxkernel_tui.agents.orchestration.ending import error_words
from maxkernel_tui.agents.orchestration.engine import SessionEngine
from maxkernel_tui.agents.orchestration.events import (
    EvaluationDone,
    LlmAnswer,
    SessionEnded,
)
from maxkernel_tui.agents.orchestration.fingerprint import kernel_hash
from maxkernel_tui.agents.orchestration.gates import AutoGate
from maxkernel_tui.agents.orchestration.limits import NothingNew
from maxkernel_tui.agents.orchestration.scoring import Score, estimated_score
from maxkernel_tui.agents.orchestration.steps import Steps
from maxkernel_tui.agents.search.algorithms import Algorithm, NodePlan
from maxkernel_tui.agents.search.config import SearchConfig
from maxkernel_tui.agents.search.expansion import (
    Duplicate,
    Expansion,
    by_hand,
    expand,
    node_steps,
)
from maxkernel_tui.agents.search.graph import (
    ACCEPTED,
    FAILED,
    PENDING,
    PRUNED,
    REJECTED,
    RUNNING,
    STOPPED,
    Node,
    SearchGraph,
)
from maxkernel_tui.agents.search.headroom import ModelView, model_view
from maxkernel_tui.agents.search.limits import CappedTools, GatedClient
from maxkernel_tui.agents.search.steering import BY_HAND, Steer, Steering, give
from maxkernel_tui.kernels.executors.errors import EvaluationLost
from maxkernel_tui.kernels.report.status import Verdict
from maxkernel_tui.kernels.service.service import KernelSource
from maxkernel_tui.store.kinds import Mode, SessionStatus

INITIAL = (
    "Write a first correct Pallas TPU kernel for this task: a simple, safe tiling that the harness "
    "accepts on every configuration. Later expansions optimise it."
)
FROM_SEED = "Start from the current kernel: keep what works, make sure the harness accepts it."


@dataclass(frozen=True)
class SearchOutcome:
    reason: str
    best: Node | None
    score_kind: str
    nodes: int
    evaluations: int
    best_version_number: int | None = None  # the best node's kernel version, as the log names it
    status: SessionStatus = SessionStatus.DONE  # FAILED: the search ended on an error


def root_plan(seed: str) -> NodePlan:
    text = FROM_SEED if seed else INITIAL
    return NodePlan((), "initial", text, text)


class Search:
    def __init__(
        self,
        *,
        base: SessionEngine,
        config: SearchConfig,
        graph: SearchGraph,
        algorithm: Algorithm,
        client: GatedClient,
        tools: CappedTools,
        seed: str = "",
    ) -> None:
        self.base, self.config, self.graph, self.algorithm = base, config, graph, algorithm
        self.client, self.tools, self.seed = client, tools, seed
        self.round = 0
        self._go = asyncio.Event()
        self._go.set()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._budget: str | None = None
        # Each kernel's fingerprint -> the first node that has it (judged or being judged), so a
        # node whose implementer repeats a kernel is merged before it costs an evaluation.
        self._kernels: dict[str, str] = {}
        self.steering = Steering(base.journal)
        for known in graph.in_order():
            if known.hash:
                self._kernels.setdefault(known.hash, known.ref)

    # -- controls (the TUI's keys) -------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return not self._go.is_set()

    def pause(self) -> None:
        """No new expansion starts until `resume`; those running finish."""
        self._go.clear()

    def resume(self) -> None:
        self._go.set()

    def stop(self) -> None:
        """Cancel the running expansions: their nodes stay unfinished; `--resume` reruns them."""
        self._stopping = True
        self._go.set()
        for task in self._tasks:
            task.cancel()

    def prune(self, ref: str) -> list[Node]:
        return self.graph.prune(ref, self.round, keep=self.steering.pinned())

    def steer(self, steer: Steer) -> Steer:
        """Store the engineer's steering action; the search takes it up at its next round (a
        node pinned is kept by pruning at once)."""
        return give(self.base.store, self.base.session_id, steer)

    # -- the search ----------------------------------------------------------------------------

    async def run(self) -> SearchOutcome:
        self._set_status(SessionStatus.ACTIVE)
        try:
            reason = await self._rounds()
        except (asyncio.CancelledError, KeyboardInterrupt):
            self._set_status(SessionStatus.STOPPED)  # cancelled (Ctrl-C): `--resume` goes on
            raise
        except Exception as error:  # a fault of ours or of the task's files: failed, not active
            return self._finish(f"error: {error_words(error)}", SessionStatus.FAILED)
        if self._stopping:
            return self._finish(reason, SessionStatus.STOPPED)
        failed = [n for n in self.graph.in_order() if n.status == FAILED]
        if failed and not any(n.status in (ACCEPTED, REJECTED) for n in self.graph.in_order()):
            # no kernel was judged because every node ran into an error: the search failed
            why = (
                f"{reason}; every node ended on an error (#{failed[0].number}: {failed[0].detail})"
            )
            return self._finish(why, SessionStatus.FAILED)
        return self._finish(reason, SessionStatus.DONE)

    async def _rounds(self) -> str:
        """Round after round until the depth, the caps or a stop; why the search ended."""
        reason, counter, round_ = "", 0, 0
        while round_ <= self.config.depth or self._steered_beyond(round_):
            self.round = round_
            plans = await self._plan(round_, fresh=f"n{counter}" not in self.graph.nodes)
            for skipped in self.algorithm.moves.skipped.values():
                self.graph.skip(skipped.node, skipped.strategy, skipped.reason)
            if not plans:
                beyond = round_ > self.config.depth  # a round for steering that grew nothing
                if beyond:
                    return f"depth {self.config.depth} reached"
                return self.algorithm.ended or "nothing left to expand"
            nodes = []
            for plan in plans:
                nodes.append(
                    self.graph.ensure(
                        f"n{counter}",
                        number=counter,
                        round_=round_,
                        parents=list(plan.parents),
                        strategy=plan.strategy,
                        plan=plan.plan,
                        tags=plan.tags,
                    )
                )
                counter += 1
            await self._go.wait()
            await self._run_round(list(zip(nodes, plans)))
            self.graph.merge_duplicates(nodes)
            reason = self._why_stop(round_)
            if reason:
                return reason
            round_ += 1
        return reason or f"depth {self.config.depth} reached"

    async def _plan(self, round_: int, fresh: bool) -> list[NodePlan]:
        """The round's nodes: the algorithm's (none past the depth), then those the engineer's
        steering asks for. `fresh`: the round is planned for the first time (not replayed)."""
        if round_ == 0:
            return [root_plan(self.seed)]
        steers = self.steering.take_up(round_, fresh)
        await self._follow_target()
        planned = (
            self.algorithm.plan_round(self.graph, round_) if round_ <= self.config.depth else []
        )
        strategies = self.algorithm.strategies
        return planned + self.steering.plans(self.graph, round_, strategies, steers)

    async def _follow_target(self) -> None:
        """The score on the TPU generation the engineer chose last: later profiles estimate on
        it, and accepted nodes scored on another generation are estimated again (once: a
        resumed search finds them done)."""
        target = self.steering.target()
        if target is None:
            return
        if target != self.tools.target:
            self.tools.estimate_on(target)
        for node in self.graph.in_order():
            if node.status != ACCEPTED or node.version_id is None:
                continue
            if re.search(rf" on {re.escape(target)}\b", node.score_kind):
                continue
            kernel = KernelSource(node.source, f"{node.ref}.py")
            result = await self.tools.profile(kernel, estimate_only=True)
            score = (
                Score(None, f"estimated on {target}: no profile ({result.error})")
                if result.summary is None
                else estimated_score(result.summary, target, self.base.limits.rank_by)
            )
            if score.value is not None:
                self.base.store.record_score(node.version_id, score.value, score.kind, score.also)
            self.graph.update(
                node,
                ACCEPTED,
                why=f"scored on {target}",
                score=score.value,
                score_kind=score.kind,
                **_model_fields(model_view(result.summary, target)),
                score_also=score.also,
            )

    def _steered_beyond(self, round_: int) -> bool:
        """Past the depth, a round runs only for steering: taken up at it before (a replay),
        or given and not taken up yet."""
        if self._stopping or self._budget:
            return False
        return self.steering.waiting() or round_ in self.steering.taken.values()

    async def _run_round(self, work: list[tuple[Node, NodePlan]]) -> None:
        tasks = self._tasks = [
            asyncio.create_task(self._expand(n, plan)) for n, plan in work if not n.final
        ]
        try:
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            if not self._stopping:  # the search itself was cancelled (Ctrl-C), not stopped by a key
                raise
        finally:
            for task in tasks:  # after a failure or a cancel, no expansion goes on unwatched
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks = []

    def _why_stop(self, round_: int) -> str:
        if self._stopping:
            return "stopped"
        if self._budget:
            return f"budget: {self._budget}"
        spent = sum(n.evals for n in self.graph.in_order() if n.round <= round_)
        if self.config.max_evals is not None and spent >= self.config.max_evals:
            return f"evaluation budget spent ({spent}/{self.config.max_evals})"
        return ""

    async def _expand(self, node: Node, plan: NodePlan) -> None:
        await self._go.wait()
        if self._stopping:
            return
        if node.pruned_round is not None:
            self.graph.update(node, PRUNED if node.status == PENDING else node.status)
            return
        if self._budget or (
            self.tools.exhausted()
            and self.base.journal.recall(
                keys.sub(keys.node_step(node.ref, "implement"), "eval"), EvaluationDone
            )
            is None
        ):
            # nothing to evaluate it with: asking the model for a kernel would be money thrown away
            self.graph.update(node, STOPPED, detail=self._budget or "no evaluations left")
            return
        self.graph.update(node, RUNNING)
        parent = self.graph[node.parents[0]] if node.parents else None
        source = parent.source if parent is not None and parent.status == ACCEPTED else self.seed
        done: Expansion | Duplicate
        try:
            if plan.strategy == BY_HAND:  # the engineer's kernel, judged like any other
                hand = self.steering.hand_source(plan.tags["steer"])
                done = await by_hand(self._steps(), node.ref, parent.source if parent else "", hand)
            else:
                done = await expand(
                    self._steps(),
                    node.ref,
                    source,
                    parent.plan if parent else "",
                    plan.instruction,
                    strategy=plan.strategy,
                    claim=lambda kernel: self._claim(kernel, node.ref),
                )
        except BudgetExceeded as error:
            self._budget = self._budget or str(error)
            self.graph.update(node, STOPPED, detail=str(error), **self._spent(node.ref))
            return
        except (LLMError, NothingNew, EvaluationLost) as error:
            self.graph.update(node, FAILED, detail=str(error), **self._spent(node.ref))
            return
        if isinstance(done, Duplicate):
            node.source = done.source
            self.graph.merge(node, self.graph[done.twin], evaluated=False)
            return
        status = ACCEPTED if done.verdict == Verdict.ACCEPTED else REJECTED
        detail = done.failure or (done.model.words() if done.model else "")
        if node.pruned_round is not None:  # pruned while it ran: the branch was turned down
            status, detail = PRUNED, f"pruned while it ran (its kernel was {done.verdict})"
        self.graph.update(
            node,
            status,
            score=done.score,
            score_kind=done.score_kind,
            score_also=done.score_also,
            version_id=done.version_id,
            source=done.source,
            hash=kernel_hash(done.source),
            detail=detail,
            evidence=list(done.evidence),
            scope=done.scope,
            **_model_fields(done.model),
            **self._spent(node.ref),
        )

    def _claim(self, source: str, ref: str) -> str | None:
        """The node that already has `source`'s kernel, or None after recording `ref` as its.
        Synchronous: siblings running side by side cannot both claim one kernel."""
        twin = self._kernels.setdefault(kernel_hash(source), ref)
        return None if twin == ref else twin

    def _steps(self) -> Steps:
        """A fresh line of work per expansion (expansions run side by side), on the session's
        journal with the search's gated client and capped tools."""
        base = self.base
        return Steps(
            journal=base.journal,
            client=self.client,
            tools=self.tools,
            workspace=base.workspace,
            gates=lambda mode: AutoGate(),
            mode=Mode.GRAPH,
            task_facts=base.task_facts,
            limits=base.limits,
            model=base.model,
            roles=base.calls.roles,  # the roles' own models and tools, as in the session
            toolbox=base.calls.toolbox,
            verdicts=base.verdicts,  # one book: a kernel one node judged is judged for all
        )

    def _spent(self, ref: str) -> dict[str, Any]:
        """Evaluations, tokens and dollars of the node's steps, from the journal (stored ones
        too)."""
        steps = node_steps(ref, self.base.limits.max_debug_attempts)
        recall = self.base.journal.recall
        answers = [a for s in steps if (a := recall(keys.sub(s, "llm"), LlmAnswer)) is not None]
        evals = [e for s in steps if (e := recall(keys.sub(s, "eval"), EvaluationDone)) is not None]
        return {
            "evals": len(evals),
            "executor_node": evals[-1].executor_node if evals else "",
            "tokens": sum(a.tokens for a in answers),
            "cost_usd": sum(a.cost_usd or 0.0 for a in answers),
        }

    def _set_status(self, status: SessionStatus) -> None:
        self.base.store.update_session(self.base.session_id, status=status, mode=Mode.GRAPH)

    def _finish(self, reason: str, status: SessionStatus) -> SearchOutcome:
        found = self.base.best  # the store's one rule, as every screen and command picks it
        best = self.graph.holding(found.version_id) if found else None
        kind = found.score_kind if found else ""
        evaluations = sum(n.evals for n in self.graph.in_order())
        version, number = (found.version_id, found.number) if found else (None, None)
        self.base.journal.emit(
            SessionEnded(
                keys.search_end(len(self.graph), evaluations, reason),
                reason,
                version,
                found.score if found else None,
                kind,
                number,
                found.score_also if found else "",
            )
        )
        self._set_status(status)
        return SearchOutcome(reason, best, kind, len(self.graph), evaluations, number, status)


def _model_fields(model: ModelView | None) -> dict[str, Any]:
    """The node's fields that keep the model's view of its kernel (none without a profile)."""
    if model is None:
        return {}
    return {
        "roofline_share": model.roofline_share,
        "reachable_share": model.reachable_share,
        "bound": model.bound,
        "model_target": model.target,
        "model_basis": str(model.basis),
    }
