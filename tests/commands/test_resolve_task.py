"""Naming a task on the command line: its id, its number, a folder, or a clear error (a folder
written as a path that is missing or is no task is said to be so, not as an unknown id)."""

from __future__ import annotations

import shutil

import pytest

from maxkernel_tui.kernels.loader import builtin_suite_dir
from maxkernel_tui.kernels.task import TaskError
from maxkernel_tui.services.tasks import resolve_task
from tests.support.task_folders import write_jaxbench


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
    with pytest.raises(TaskError, match=r"no task '99z': no task here has that id \(e\.g\. 1p_"):
        resolve_task("99z")


def test_a_missing_folder_written_as_a_path_is_said_to_be_missing(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("./8p_GEMM_Bias", "tasks/8p_GEMM_Bias", "~/8p_GEMM_Bias", str(tmp_path / "x")):
        with pytest.raises(TaskError, match=r"no such task folder \(the path does not exist\)"):
            resolve_task(name)


def test_a_folder_that_is_no_task_says_what_it_lacks(tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskError) as raised:
        resolve_task(str(tmp_path / "empty"))
    assert "holds neither kernel_task.yaml with reference.py" in str(raised.value)
    assert "nor baseline.py (JAXBench's)" in str(raised.value)
    (tmp_path / "file.py").write_text("x = 1\n")
    with pytest.raises(TaskError, match=r"a file, not a folder"):
        resolve_task(str(tmp_path / "file.py"))


def test_a_bare_name_that_is_neither_an_id_nor_a_folder_says_both(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TaskError) as raised:
        resolve_task("8p_GEMM_Bais")
    assert "no task '8p_GEMM_Bais': no task here has that id (e.g. 1p_Flash_Attention" in str(
        raised.value
    )
    assert f"there is no folder {str(tmp_path / '8p_GEMM_Bais')!r}" in str(raised.value)


def test_a_jaxbench_folder_is_found_by_its_path_as_written(tmp_path, monkeypatch) -> None:
    write_jaxbench(tmp_path / "tasks")
    monkeypatch.chdir(tmp_path)
    assert resolve_task("./tasks/8p_GEMM_Bias").source_format == "jaxbench"
    assert resolve_task("tasks/8p_GEMM_Bias/").task_id == "8p_GEMM_Bias"
