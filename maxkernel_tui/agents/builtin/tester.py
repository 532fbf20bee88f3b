"""The built-in agent as tester: edge-case configurations derived from the task's check
configuration, deterministically, without jax (the configuration is read statically).

Each proposal changes one size of the check configuration to an odd number of its tile unit
(128 for a size that is a multiple of 128, 8 for a multiple of 8, else 1), below the check value
where it can: a size that no power-of-two block divides and, for small ones, smaller than one
block, while the arrays keep the TPU tiling the check shapes had. The validation, which runs the
reference, rejects whichever still breaks a rule (a size that is not the one a tile rule sees).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from maxkernel_tui.agents.builtin.errors import BuiltinAgentError
from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels.edge_configs import check_params
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import Task, TaskError

MAX_PROPOSALS = 3


def answer_tester(context: Mapping[str, Any] | None) -> str:
    """The tester's JSON answer for the step in `context` (the sub-agent contract)."""
    task_dir = (context or {}).get("task_dir")
    if not isinstance(task_dir, str) or not task_dir:
        raise BuiltinAgentError("the request's context has no task_dir (the task folder)")
    try:
        task = load_task(Path(task_dir), cache=cache_dir())
    except TaskError as error:
        raise BuiltinAgentError(f"the request's task_dir is not a usable task: {error}") from None
    configs = [
        {"name": name, "params": params, "why": why} for name, params, why in _proposals(task)
    ]
    return json.dumps({"configs": configs})


def edge_proposals(task: Task) -> list[tuple[str, dict[str, Any]]]:
    """The tester's edge cases for `task` as (name, params of CONFIGS), unvalidated."""
    return [(name, params) for name, params, _ in _proposals(task)]


def _proposals(task: Task) -> list[tuple[str, dict[str, Any], str]]:
    check = check_params(task)
    sizes = {
        k: v for k, v in (check or {}).items() if isinstance(v, int) and not isinstance(v, bool)
    }
    proposals: list[tuple[str, dict[str, Any], str]] = []
    # the largest sizes first: they are the ones blocks tile
    for key in sorted(sizes, key=lambda k: -sizes[k]):
        value = odd_tiles(sizes[key])
        if value != sizes[key] and len(proposals) < MAX_PROPOSALS:
            proposals.append(
                (_name(key, value), {**(check or {}), key: value}, _why(key, sizes[key], value))
            )
    return proposals


def odd_tiles(value: int) -> int:
    """An odd multiple of `value`'s tile unit, the largest below it (or above when none is)."""
    unit = _unit(value)
    count = value // unit - 1
    if count % 2 == 0:
        count -= 1
    return count * unit if count >= 1 else 3 * unit if value == unit else value


def _why(key: str, check: int, value: int) -> str:
    unit = _unit(check)
    if unit == 1:
        size = "an odd size, smaller than the check's" if value < check else "an odd size"
    elif value == unit:
        size = f"a single {unit}-wide tile, smaller than any larger block"
    else:
        size = f"{value // unit} tiles of {unit}, which no larger power-of-two block divides"
    return f"{key}={value} instead of {check}: {size}"


def _unit(value: int) -> int:
    return 128 if value % 128 == 0 else 8 if value % 8 == 0 else 1


def _name(key: str, value: int) -> str:
    return f"edge_{re.sub(r'[^a-z0-9_]', '_', key.lower())[:24]}_{value}"
