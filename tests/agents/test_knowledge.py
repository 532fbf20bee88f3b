"""The knowledge pack: every topic loads, role selections stay affordable, and every claim that
can be run is run against the installed jax (complete examples in TPU interpret mode and a
TPU v5e compile; quoted error messages re-produced) in one subprocess, so pytest stays light."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from maxkernel_tui.agents import knowledge
from maxkernel_tui.kernels.evaluation.static.checks import static_problems
from tests.support.knowledge_pack import (
    FAMILIES,
    MAX_PROMPT_BYTES,
    ROLES,
    examples,
    fences,
    quoted_errors,
)

PROBE = Path(__file__).with_name("knowledge_probe.py")


def test_every_topic_loads_with_a_title_and_a_sensible_length():
    assert set(knowledge.TOPICS) == {p.stem for p in Path(knowledge.__file__).parent.glob("*.md")}
    for name, summary in knowledge.TOPICS.items():
        text = knowledge.topic(name)
        assert text.startswith("# "), name
        assert 40 <= len(text.splitlines()) <= 120, f"{name}: {len(text.splitlines())} lines"
        assert summary and "\n" not in summary


def test_unknown_names_say_what_is_known():
    with pytest.raises(KeyError, match="known: harness"):
        knowledge.topic("nope")
    with pytest.raises(KeyError, match="known roles: planner"):
        knowledge.for_role("tester-of-nothing")


def test_pack_concatenates_each_topic_once_in_order():
    text = knowledge.pack(["errors", "memory", "errors"])
    assert text.count("<!-- knowledge: errors -->") == 1
    assert text.index("knowledge: errors") < text.index("knowledge: memory")
    assert knowledge.topic("memory").strip() in text


def test_role_selections_fit_the_prompt_budget_and_debugger_reads_errors():
    for role in ROLES:
        assert len(knowledge.for_role(role).encode()) < MAX_PROMPT_BYTES, role
        for family in FAMILIES:
            assert len(knowledge.for_role(role, family).encode()) < MAX_PROMPT_BYTES, (role, family)
    assert "errors" in knowledge.role_topics("debugger")
    assert "harness" in knowledge.role_topics("implementer")
    assert "attention" in knowledge.role_topics("implementer", "attention")
    assert knowledge.role_topics("planner", "unheard-of") == knowledge.role_topics("planner")
    assert knowledge.for_role("planner") == knowledge.pack(knowledge.role_topics("planner"))


def test_every_python_fragment_parses():
    for name, info, body in fences("python"):
        try:
            ast.parse(body)
        except SyntaxError as error:
            pytest.fail(f"{name}: ```{info} block does not parse: {error}")


def test_examples_follow_the_harness_rules():
    found = examples()
    assert {"matmul", "rmsnorm", "page_gather", "colsum_dma", "flash_attention"} <= set(found)
    for name, source in found.items():
        assert static_problems(source) == [], name
        assert "interpret" not in source, name


@pytest.fixture(scope="module")
def probe() -> dict:
    request = {"examples": examples(), "errors": sorted(quoted_errors())}
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, str(PROBE)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # the probe runs jax in a child process and compiles for TPU
def test_complete_examples_run_in_interpret_mode_and_compile_for_tpu(probe):
    problems = {name: result for name, result in probe["examples"].items() if result != "ok"}
    assert not problems, problems


@pytest.mark.slow
def test_every_quoted_error_is_still_what_jax_says(probe):
    assert len(quoted_errors()) >= 12
    for error_id, quoted in quoted_errors().items():
        assert "\n" not in quoted, f"{error_id}: quote one line"
        messages = probe["errors"][error_id]
        assert messages, error_id
        for lines in messages:
            assert any(quoted in line for line in lines), (
                f"{error_id}: jax no longer says {quoted!r}; it says: {lines[:3]}"
            )
