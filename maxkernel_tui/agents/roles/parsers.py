"""Strict parsers of sub-agent answers. A `ValueError` makes the client re-ask the model with the
message, so each message says exactly what to fix."""

from __future__ import annotations

import ast
import re

from maxkernel_tui.agents.roles.tunables import find_tunables
from maxkernel_tui.kernels.evaluation.static_checks import static_problems

PLAN_SECTIONS = ("tiling", "grid", "memory", "expected bound")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s*(.+?)\s*#*\s*$", re.MULTILINE)
_PYTHON_BLOCK = re.compile(r"```(?:python|py)[ \t]*\n(.*?)\n```", re.DOTALL)


def parse_plan(text: str) -> str:
    """The plan as Markdown, with every required section present."""
    headings = [h.lower() for h in _HEADING.findall(text)]
    missing = [s for s in PLAN_SECTIONS if not any(s in h for h in headings)]
    if missing:
        raise ValueError("the plan must be Markdown with `##` sections " + ", ".join(f"'{s.title()}'" for s in
                         PLAN_SECTIONS) + f"; missing: {', '.join(missing)}")
    return text.strip() + "\n"


def parse_kernel(text: str) -> str:
    """The kernel file of exactly one ```python block: it parses, defines `computation`, follows
    the harness's static rules and declares its tunables."""
    blocks = _PYTHON_BLOCK.findall(text)
    if len(blocks) != 1:
        raise ValueError(f"answer with exactly one ```python fenced block holding the whole kernel file "
                         f"(found {len(blocks)})")
    source = blocks[0].strip() + "\n"
    try:
        ast.parse(source)
    except SyntaxError as error:
        raise ValueError(f"the kernel does not parse: line {error.lineno}: {error.msg}") from None
    problems = static_problems(source, "kernel.py")
    if problems:
        raise ValueError("the kernel breaks the harness rules: " + "; ".join(problems))
    if not find_tunables(source):
        raise ValueError("declare the tunable parameters in one place: a comment line starting with "
                         "`# Tunables` followed directly by module-level lines `NAME = <int>`")
    return source


def parse_diagnosis(text: str) -> str:
    """The profiler's diagnosis, which must end in one `Next:` line."""
    if not re.search(r"^\s*(\*\*)?Next:", text, re.MULTILINE):
        raise ValueError("end the diagnosis with one line starting `Next:` naming the single next thing to try")
    return text.strip() + "\n"


def parse_answer(text: str) -> str:
    if not text.strip():
        raise ValueError("the answer is empty")
    return text.strip() + "\n"
