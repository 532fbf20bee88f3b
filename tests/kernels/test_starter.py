"""The workbench's starter skeleton names the entry point the task takes, with the reference's
parameters: `computation` for our tasks and MaxKernel's, `workload` for a JAXBench folder."""

from __future__ import annotations

import ast
from pathlib import Path

from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.starter import starter_source
from tests.support.task_folders import write_jaxbench, write_plain


def _entry(source: str) -> tuple[str, list[str]]:
    [entry] = [
        n
        for n in ast.parse(source).body
        if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
    ]
    return entry.name, [a.arg for a in entry.args.args]


def test_a_jaxbench_folder_gets_workload_with_the_baselines_parameters(tmp_path: Path) -> None:
    source = starter_source(load_task(write_jaxbench(tmp_path, expert=False)))
    assert _entry(source) == ("workload", ["x", "w"])


def test_a_plain_folder_gets_computation_with_the_references_parameters(tmp_path: Path) -> None:
    source = starter_source(load_task(write_plain(tmp_path, "12p_RMSNorm")))
    assert _entry(source) == ("computation", ["x", "scale", "eps"])
