"""Naming a task on the command line: its id, its number, a folder, or a clear error."""

from __future__ import annotations

import shutil

import pytest

from maxkernel_tui.kernels.loader import builtin_suite_dir
from maxkernel_tui.kernels.task import TaskError
from maxkernel_tui.services.tasks import resolve_task


@pytest.mark.parametrize("name", ["12p", "12p_RMSNorm", str(builtin_suite_dir() / "12p_RMSNorm")])
def test_an_id_its_number_or_its_folder(name: str) -> None:
    assert resolve_task(name).task_id == "12p_RMSNorm"


def test_1p_is_not_11p() -> None:
    assert resolve_task("1p").task_id == "1p_Flash_Attention"


def test_a_folder_whose_task_id_differs_is_found_by_its_id_only(tmp_path) -> None:
    shutil.copytree(builtin_suite_dir() / "8p_GEMM", tmp_path / "8p_GEMM")
    (tmp_path / "8p_GEMM" / "kernel_task.yaml").write_text(
        (tmp_path / "8p_GEMM" / "kernel_task.yaml")
        .read_text()
        .replace("task_id: 8p_GEMM", "task_id: 9z_Other")
    )
    assert resolve_task("9z_Other", tmp_path).task_id == "9z_Other"
    with pytest.raises(TaskError, match="no task '8p_GEMM'"):
        resolve_task("8p_GEMM", tmp_path)


def test_an_unknown_id_names_some_known_ones() -> None:
    with pytest.raises(TaskError, match=r"no task '99z' \(e\.g\. 1p_Flash_Attention"):
        resolve_task("99z")
