"""Step keys and event refs: built here, parsed here, nowhere else. No jax here.

A step's key is the same on every run of the same step (`i2/debug1`, `i1/plan.1`, `n3/implement`,
`explain/3`), and the refs of the events a step writes hang below it (`i2/debug1/eval`): a resumed
session finds what it stored under the same strings. They must never change, or stored sessions
stop resuming.
"""

from __future__ import annotations

START = "start"  # the ref of the session's first event (SessionStarted)


def iteration(number: int) -> str:
    """The prefix of the loop's iteration `number` (from 1): `i2`."""
    return f"i{number}"


def iteration_step(number: int, name: str) -> str:
    """A step of the loop's iteration: `i2/plan`."""
    return sub(iteration(number), name)


def iteration_of(step: str) -> int:
    """The iteration a step key belongs to ("i2/debug1" -> 2); 0 for steps outside the loop."""
    head = step.split("/", 1)[0]
    return int(head[1:]) if head.startswith("i") and head[1:].isdigit() else 0


def node_step(node: str, name: str) -> str:
    """A step of a search node's expansion: `n3/implement`."""
    return f"{node}/{name}"


def sub(step: str, name: str) -> str:
    """A step or event below `step`: `i1/tune/c0`, `i2/debug1/eval`."""
    return f"{step}/{name}"


def model_turn(step: str, turn: int) -> str:
    """Where the events of a step's model turn `turn` (from 0) hang: the step itself for the
    first (as before tools existed), `i1/implement/t2` for the turns after tool results."""
    return step if turn == 0 else sub(step, f"t{turn}")


def debug(prefix: str, attempt: int) -> str:
    """The debugger's `attempt`-th fix (from 1) in the iteration or node `prefix`."""
    return sub(prefix, f"debug{attempt}")


def retry(step: str, attempt: int) -> str:
    """The `attempt`-th re-proposal of a rejected step (`i1/plan.1`); the first is the step."""
    return f"{step}.{attempt}" if attempt else step


def nothing_new(step: str) -> str:
    """Where the engineer is asked what now, a role having nothing new at `step` (HITL)."""
    return sub(step, "nothing-new")


def explain(number: int) -> str:
    return f"explain/{number}"


def end(iteration: int) -> str:
    """The ref of the loop's end after `iteration` iterations."""
    return f"end/{iteration}"


def search_end(nodes: int, evaluations: int, reason: str) -> str:
    return f"end/search/{nodes}/{evaluations}/{reason}"


def node_change(node: str, what: str) -> str:
    """The ref of a search node's change event: `n3/node/accepted`."""
    return f"{node}/node/{what}"


def strategy_skipped(node: str, strategy: str) -> str:
    """The ref of a strategy skipped on a search node: `n3/skipped/whole-k`."""
    return f"{node}/skipped/{strategy}"


def steered(steer_id: int) -> str:
    """The ref of the search taking up steering row `steer_id`: `steer/4`."""
    return f"steer/{steer_id}"


def file_name(step: str) -> str:
    """A file name for a step's kernel in the session's directory (`i1-tester.py`)."""
    return f"{step.replace('/', '-')}.py"
