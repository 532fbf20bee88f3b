"""A search node's state (`NodeStatus`): the vocabulary of the graph's nodes, their store rows
and their events. Plain data; no jax."""

from __future__ import annotations

from enum import StrEnum


class NodeStatus(StrEnum):
    """A search node's state; the final ones are not run again by a resumed search."""

    PENDING = "pending"
    RUNNING = "running"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    MERGED = "merged"
    STOPPED = "stopped"
    FAILED = "failed"
    PRUNED = "pruned"
