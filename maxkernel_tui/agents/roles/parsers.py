"""Strict parsers of sub-agent answers. A `ValueError` makes the client re-ask the model with the
message, so each message says exactly what to fix."""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from maxkernel_tui.agents.roles.tunables import find_tunables
from maxkernel_tui.codec import JsonData
from maxkernel_tui.kernels.edge_configs import EDGE_NAME
from maxkernel_tui.kernels.evaluation.static.checks import static_problems
from maxkernel_tui.kernels.limits import text_oversize_problem
from maxkernel_tui.kernels.task import DEFAULT_ENTRY_POINTS

PLAN_SECTIONS = ("tiling", "grid", "memory", "expected bound")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s*(.+?)\s*#*\s*$", re.MULTILINE)
_JSON_BLOCK = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n```", re.DOTALL)
MAX_EDGE_CASES = 3
_PYTHON_BLOCK = re.compile(r"```(?:python|py)[ \t]*\n(.*?)\n```", re.DOTALL)


def _bounded(parse: Callable[[str], str]) -> Callable[[str], str]:
    """`parse`, refusing at once an answer larger than any kernel file (the regular expressions
    and `ast.parse` would take minutes on megabytes); the model is asked again with why."""

    @functools.wraps(parse)
    def checked(text: str) -> str:
        if too_large := text_oversize_problem(text, "the answer"):
            raise ValueError(too_large)
        return parse(text)

    return checked


@_bounded
def parse_plan(text: str) -> str:
    """The plan as Markdown, with every required section present."""
    headings = [h.lower() for h in _HEADING.findall(text)]
    missing = [s for s in PLAN_SECTIONS if not any(s in h for h in headings)]
    if missing:
        raise ValueError(
            "the plan must be Markdown with `##` sections "
            + ", ".join(f"'{s.title()}'" for s in PLAN_SECTIONS)
            + f"; missing: {', '.join(missing)}"
        )
    return text.strip() + "\n"


def kernel_parser(entry_points: tuple[str, ...] = DEFAULT_ENTRY_POINTS) -> Callable[[str], str]:
    """The parser of a kernel answer for a task whose candidates define one of `entry_points`
    (`Task.entry_points`: JAXBench's tasks take `workload` too)."""

    @_bounded
    def parse_kernel(text: str) -> str:
        """The kernel file of exactly one ```python block: it parses, defines the task's entry
        point, follows the harness's static rules and declares its tunables."""
        blocks = _PYTHON_BLOCK.findall(text)
        if len(blocks) != 1:
            raise ValueError(
                f"answer with exactly one ```python fenced block holding the whole kernel file "
                f"(found {len(blocks)})"
            )
        source = blocks[0].strip() + "\n"
        try:
            ast.parse(source)
        except SyntaxError as error:
            raise ValueError(
                f"the kernel does not parse: line {error.lineno}: {error.msg}"
            ) from None
        problems = static_problems(source, "kernel.py", entry_points)
        if problems:
            raise ValueError("the kernel breaks the harness rules: " + "; ".join(problems))
        if not find_tunables(source):
            raise ValueError(
                "declare the tunable parameters in one place: a comment line starting with "
                "`# Tunables` followed directly by module-level lines `NAME = <int>`"
            )
        return source

    return parse_kernel


parse_kernel = kernel_parser()  # a task of our own or MaxKernel's format: `computation`


@_bounded
def parse_diagnosis(text: str) -> str:
    """The profiler's diagnosis, which must end in one `Next:` line."""
    if not re.search(r"^\s*(\*\*)?Next:", text, re.MULTILINE):
        raise ValueError(
            "end the diagnosis with one line starting `Next:` naming the single next thing to try"
        )
    return text.strip() + "\n"


@_bounded
def parse_answer(text: str) -> str:
    if not text.strip():
        raise ValueError("the answer is empty")
    return text.strip() + "\n"


@dataclass(frozen=True)
class EdgeCase(JsonData):
    """One of the tester's edge-case configurations, as it answered it."""

    name: str
    params: dict[str, int]
    why: str


@_bounded
def parse_edge_cases(text: str) -> str:
    """The tester's answer,
    `{"configs": [{"name": "edge_...", "params": {...}, "why": "..."}]}` (bare or in one fenced
    block), checked and returned as canonical JSON; the harness's rules on the
    values themselves are applied by the validation, which runs the reference."""
    blocks = _JSON_BLOCK.findall(text)
    raw = blocks[0] if len(blocks) == 1 else text.strip()
    try:
        answer = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(f'answer with one JSON object {{"configs": [...]}}: {error}') from None
    configs = answer.get("configs") if isinstance(answer, dict) else None
    if not isinstance(configs, list) or len(configs) > MAX_EDGE_CASES:
        raise ValueError(
            f"the JSON object needs a `configs` list of at most {MAX_EDGE_CASES} entries"
        )
    cases = [_edge_case(n, entry) for n, entry in enumerate(configs)]
    if len({c.name for c in cases}) != len(cases):
        raise ValueError("each edge case needs a name of its own")
    return json.dumps({"configs": [c.to_json() for c in cases]})


def edge_cases(parsed: str) -> list[EdgeCase]:
    """The edge cases of a `parse_edge_cases` answer."""
    return [EdgeCase.from_json(entry) for entry in json.loads(parsed).get("configs", [])]


def edge_proposals(parsed: str) -> list[tuple[str, dict[str, int]]]:
    """(name, params) of each edge case in a `parse_edge_cases` answer."""
    return [(case.name, case.params) for case in edge_cases(parsed)]


def _edge_case(n: int, entry: Any) -> EdgeCase:
    """Entry `n` of the answer's configs; a ValueError saying what is wrong with it otherwise."""
    if not isinstance(entry, dict) or set(entry) != {"name", "params", "why"}:
        raise ValueError(f"configs[{n}] must be an object with exactly `name`, `params` and `why`")
    case = EdgeCase(**entry)
    name, params, why = case.name, case.params, case.why
    if not isinstance(name, str) or not name.startswith("edge_") or not EDGE_NAME.match(name):
        raise ValueError(
            f"configs[{n}].name {name!r} must start with `edge_` and use only a-z, 0-9 and _ "
            "(at most 40 characters)"
        )
    if (
        not isinstance(params, dict)
        or not params
        or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in params.values()
        )
    ):
        raise ValueError(
            f"configs[{n}].params must map each key of the check configuration to a positive int"
        )
    if not isinstance(why, str) or not why.strip():
        raise ValueError(
            f"configs[{n}].why must say in words which failure the edge case would catch"
        )
    return case
