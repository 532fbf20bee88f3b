"""A mistyped `--task` folder, through every command that takes one and the workbench's own
`maxkernel-tui --task`: the folder is said to be missing (or what it lacks), exit status 2,
never "no task" with a list of built-in ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import cli

KERNEL = str(Path(__file__).parents[1] / "data" / "kernels" / "agent" / "rmsnorm_tunable.py")


def _commands(task: str) -> list[tuple[str, ...]]:
    return [
        ("run", "--task", task, "--provider", "builtin"),
        ("search", "--task", task, "--algorithm", "beam", "--provider", "builtin"),
        ("eval", KERNEL, "--task", task),
        ("profile", KERNEL, "--task", task),
        ("tasks", "show", task),
        ("--task", task),  # the workbench: refused before any screen opens
    ]


@pytest.mark.parametrize("args", _commands("./tasks/8p_GEMM_Bais"), ids=lambda a: a[0])
def test_a_missing_folder_is_said_to_be_missing(args: tuple[str, ...]) -> None:
    done = cli(*args, check=False)
    assert done.returncode == 2, done.stderr
    assert "tasks/8p_GEMM_Bais: no such task folder (the path does not exist)" in done.stderr
    assert "e.g." not in done.stderr and "Traceback" not in done.stderr


def test_a_folder_that_is_no_task_says_what_it_lacks(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not a task\n")
    for args in _commands(str(tmp_path / "notes"))[:3:2]:  # run and eval
        done = cli(*args, check=False)
        assert done.returncode == 2, done.stderr
        assert "not a task folder: it holds neither kernel_task.yaml" in done.stderr
