"""Input far larger than any kernel is refused at once, with its size and the limit in words:
a candidate file, a task's files, a model's answer to any role (agents and search)."""

import subprocess
import sys
import time

import pytest

from maxkernel_tui.agents.roles import parsers
from maxkernel_tui.kernels.evaluation.static.checks import static_problems
from maxkernel_tui.kernels.limits import MAX_SOURCE_BYTES
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import TaskError

HUGE = "x = 1\n" * 2_000_000  # 12 MB: parsing it alone took ~40 s here


def test_the_static_rules_refuse_a_huge_source_before_parsing_it():
    started = time.monotonic()
    problems = static_problems(HUGE, "huge.py")
    assert time.monotonic() - started < 1.0
    assert problems == [
        "huge.py is 11.4 MiB (12,000,000 bytes), over the limit of 512 KiB for a source file: "
        "a kernel is a few hundred lines"
    ]


def test_a_source_at_the_limit_is_still_judged_by_the_rules():
    source = "def computation(x):\n    return x\n"
    padded = source + "#" * (MAX_SOURCE_BYTES - len(source) - 1) + "\n"
    assert len(padded.encode()) == MAX_SOURCE_BYTES
    assert static_problems(padded) == []


def test_a_task_whose_reference_is_huge_is_a_task_error(tmp_path):
    folder = tmp_path / "huge_task"
    folder.mkdir()
    (folder / "kernel_task.yaml").write_text("task_id: huge_task\natol: 0.01\nrtol: 0.01\n")
    (folder / "reference.py").write_text(HUGE)
    with pytest.raises(TaskError, match=r"reference.py is 11.4 MiB .* over the limit of 512 KiB"):
        load_task(folder)


def test_eval_of_a_huge_file_is_rejected_within_seconds(tmp_path):
    kernel = tmp_path / "huge.py"
    kernel.write_text(HUGE)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "maxkernel_tui.cli", "eval", str(kernel), "--task", "12p"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert "over the limit of 512 KiB" in done.stdout and "static" in done.stdout
    assert elapsed < 30, f"took {elapsed:.0f} s"


@pytest.mark.parametrize(
    "parse",
    [
        parsers.parse_plan,
        parsers.parse_kernel,
        parsers.parse_diagnosis,
        parsers.parse_answer,
        parsers.parse_edge_cases,
    ],
)
def test_a_huge_model_answer_is_refused_before_it_is_parsed(parse):
    answer = "```python\n" + HUGE + "```\n"
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"the answer is 11.4 MiB .* over the limit of 512 KiB"):
        parse(answer)
    assert time.monotonic() - started < 1.0
