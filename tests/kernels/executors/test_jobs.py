"""What a driver sends a node: a task folder as bytes, written back identically under its
digest, never outside it. Pure Python, no Ray."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from maxkernel_tui.kernels.executors.jobs import TaskFiles, TaskShippingError
from maxkernel_tui.kernels.loader import load_task

TASK = Path(__file__).parents[2] / "data" / "ray_tasks" / "1r_Scaled_Add"


def test_a_task_folder_is_written_back_on_a_node_as_it_was(tmp_path: Path) -> None:
    files = TaskFiles.of(load_task(TASK))
    written = files.write_under(tmp_path)
    assert written.name == TASK.name
    for name in ("kernel_task.yaml", "reference.py"):
        assert (written / name).read_bytes() == (TASK / name).read_bytes()
    assert files.write_under(tmp_path) == written  # a second job finds it in place
    assert load_task(written).task_id == "1r_Scaled_Add"


def test_a_changed_task_file_changes_the_digest_and_pycache_is_not_sent(tmp_path: Path) -> None:
    copy = tmp_path / TASK.name
    shutil.copytree(TASK, copy)
    (copy / "__pycache__").mkdir()
    (copy / "__pycache__" / "reference.cpython-311.pyc").write_bytes(b"\0")
    before = TaskFiles.of(load_task(copy))
    assert all("__pycache__" not in name for name, _ in before.files)
    (copy / "reference.py").write_text((copy / "reference.py").read_text() + "\n# changed\n")
    assert TaskFiles.of(load_task(copy)).digest != before.digest


def test_a_file_name_that_climbs_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    bad = TaskFiles("t", (("../escape.py", b"x"),), "0123")
    with pytest.raises(TaskShippingError, match="outside the folder"):
        bad.write_under(tmp_path / "root")
    assert not (tmp_path / "escape.py").exists()
