"""Spreads jobs over a Ray cluster: one long-lived `NodeService` actor pinned to each node (its
harnesses pre-warmed), at most `slots` jobs in flight per node, the least busy node first. A
job whose node is lost (its actor or raylet killed, the node stopped) is sent to another node,
at most `retries` times; the lost node gets no more jobs. Jobs that need a TPU (an evaluation,
whose timing is measured only on a device; a traced profile) go only to nodes with the TPU
resource when the cluster has any; the rest anywhere. Blocking calls, made from threads.
Imports Ray (only when the Ray executor is chosen); no jax."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from maxkernel_tui.kernels.executors.errors import EvaluationLost
from maxkernel_tui.kernels.executors.jobs import EvalAnswer, EvalJob, ProfileAnswer, ProfileJob
from maxkernel_tui.kernels.executors.node_service import NodeService
from maxkernel_tui.kernels.executors.ray_cluster import ClusterFacts, NodeFacts

MAX_SLOTS_PER_NODE = 8  # each slot holds two jax processes (candidate and reference)
STARTUP_TIMEOUT_S = 300.0
_LOST = (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError)
Answer = TypeVar("Answer")


class NodesLost(EvaluationLost):
    """A job could not be run: every node it was sent to was lost, or none is left."""


@dataclass
class NodeHandle:
    facts: NodeFacts
    actor: Any  # ray.actor.ActorHandle of NodeService
    label: str
    slots: int
    busy: int = 0
    alive: bool = True
    why_lost: str = ""

    @property
    def tpu(self) -> bool:
        return self.facts.tpus > 0


@dataclass(frozen=True)
class DispatchStats:
    """What the dispatcher did: jobs per node, and the nodes it lost with why."""

    per_node: dict[str, int] = field(default_factory=dict)
    lost: dict[str, str] = field(default_factory=dict)
    retried: int = 0


def slots_for(node: NodeFacts) -> int:
    """Jobs at a time on a node: one per CPU (at most 8); one on a TPU node, whose timing needs
    the device alone."""
    if node.tpus:
        return 1
    return max(1, min(node.cpus, MAX_SLOTS_PER_NODE))


class RayDispatcher:
    def __init__(self, cluster: ClusterFacts, *, retries: int = 2) -> None:
        self.cluster = cluster
        self.retries = retries
        self._changed = threading.Condition()
        self._per_node: dict[str, int] = {}
        self._retried = 0
        self.nodes = [self._start(node) for node in cluster.alive]
        self._await_started()

    @property
    def slots(self) -> int:
        """Jobs that can run at once on the nodes still alive."""
        return sum(n.slots for n in self.nodes if n.alive)

    def evaluate(self, job: EvalJob) -> EvalAnswer:
        answer: EvalAnswer = self._run(lambda actor: actor.evaluate.remote(job), needs_tpu=True)
        return answer

    def profile(self, job: ProfileJob) -> ProfileAnswer:
        answer: ProfileAnswer = self._run(
            lambda actor: actor.profile.remote(job), needs_tpu=job.trace
        )
        return answer

    def stats(self) -> DispatchStats:
        with self._changed:
            lost = {n.label: n.why_lost for n in self.nodes if not n.alive}
            return DispatchStats(dict(self._per_node), lost, self._retried)

    def close(self) -> None:
        """End the node actors (their harnesses' workers end with them)."""
        for node in self.nodes:
            if node.alive:
                ray.kill(node.actor, no_restart=True)
            node.alive = False

    # -- internals --------------------------------------------------------------------------------

    def _start(self, facts: NodeFacts) -> NodeHandle:
        slots = slots_for(facts)
        actor = (
            ray.remote(NodeService)
            .options(
                num_cpus=0,  # it waits on its worker processes; the slots are counted here
                max_concurrency=slots + 1,  # + the ping
                max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(facts.node_id, soft=False),
            )
            .remote(slots, facts.node_id)
        )
        return NodeHandle(facts, actor, facts.node_id[:8], slots)

    def _await_started(self) -> None:
        pings = {node.actor.ping.remote(): node for node in self.nodes}
        ready, _ = ray.wait(list(pings), num_returns=len(pings), timeout=STARTUP_TIMEOUT_S)
        for ref, node in pings.items():
            if ref not in ready:
                self._lose(node, f"its service did not start in {STARTUP_TIMEOUT_S:.0f} s")
                continue
            try:
                node.label = ray.get(ref)
            except _LOST as error:
                self._lose(node, f"its service failed to start: {error}")
        if not any(n.alive for n in self.nodes):
            raise NodesLost("no node of the cluster could start the evaluation service")

    def _run(self, call: Callable[[Any], Any], *, needs_tpu: bool) -> Any:
        tried: list[str] = []
        for _ in range(self.retries + 1):
            node = self._acquire(needs_tpu, tried)
            try:
                answer = ray.get(call(node.actor))
            except _LOST as error:
                self._lose(node, f"{type(error).__name__}: {str(error).splitlines()[0]}")
                tried.append(node.label)
                continue
            finally:
                self._release(node)
            with self._changed:
                self._per_node[answer.node] = self._per_node.get(answer.node, 0) + 1
            return answer
        raise NodesLost(
            f"the job was lost on {len(tried)} node(s) ({', '.join(tried)}); retries exhausted"
        )

    def _acquire(self, needs_tpu: bool, tried: list[str]) -> NodeHandle:
        with self._changed:
            if tried:
                self._retried += 1
            while True:
                alive = [n for n in self.nodes if n.alive]
                if not alive:
                    lost = "; ".join(f"{n.label}: {n.why_lost}" for n in self.nodes)
                    raise NodesLost(f"no node of the cluster is left ({lost})")
                pool = (
                    [n for n in alive if n.tpu]
                    if needs_tpu and any(n.tpu for n in alive)
                    else alive
                )
                free = [n for n in pool if n.busy < n.slots]
                if free:
                    node = min(free, key=lambda n: (n.label in tried, n.busy / n.slots))
                    node.busy += 1
                    return node
                self._changed.wait()

    def _release(self, node: NodeHandle) -> None:
        with self._changed:
            node.busy -= 1
            self._changed.notify_all()

    def _lose(self, node: NodeHandle, why: str) -> None:
        with self._changed:
            node.alive, node.why_lost = False, why
            self._changed.notify_all()
