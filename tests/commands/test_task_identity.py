"""A task is named by its folder: a task folder holding a built-in task's id (a copy of the
built-in 12p, say, as MaxKernel's dataset has all 50 ids) is never taken for the built-in one,
by an export's Reproduce line, by the sessions list, by resume, or by the workbench's kernel
file. The session's folder comes from its stored start, so older sessions are told apart too."""

from __future__ import annotations

import shutil
from pathlib import Path

from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task
from maxkernel_tui.services.export import export_session
from maxkernel_tui.services.sessions import session_cells
from maxkernel_tui.services.tasks import resolve_task, task_argument, workbench_name
from maxkernel_tui.store import Store

BUILTIN = next(builtin_suite_dir().glob("12p_*"))


def a_session(store: Store, task_id: str, task_dir: Path) -> str:
    """A session as the engine writes it: the row, then its start event naming the folder."""
    session = store.create_session(task_id, "hitl")
    store.append_event(
        session.id, "session_started", {"task_id": task_id, "task_dir": str(task_dir)}
    )
    store.add_kernel_version(session.id, "def computation(x, scale, epsilon):\n    return x\n")
    return session.id


def test_a_folder_with_a_builtin_id_is_named_by_its_folder_everywhere(tmp_path) -> None:
    folder = tmp_path / "my tasks" / BUILTIN.name  # a space: the Reproduce line quotes it
    shutil.copytree(BUILTIN, folder)
    ours, builtin = load_task(folder), load_task(BUILTIN)
    assert ours.task_id == builtin.task_id

    with Store(tmp_path / "sessions.db") as store:
        on_folder = a_session(store, ours.task_id, folder)
        on_builtin = a_session(store, builtin.task_id, BUILTIN)
        (folder_md,) = [
            p for p in export_session(store, on_folder, tmp_path / "a") if p.suffixes == [".md"]
        ]
        (builtin_md,) = [
            p for p in export_session(store, on_builtin, tmp_path / "b") if p.suffixes == [".md"]
        ]
        cells = {s.session.id: session_cells(s)[1] for s in store.list_sessions()}
        sessions = {i: store.session(i) for i in (on_folder, on_builtin)}

    assert f"--task '{folder}'" in folder_md.read_text()
    assert f"--task {builtin.task_id}\n" in builtin_md.read_text()
    assert cells[on_builtin] == builtin.task_id
    assert cells[on_folder] == f"{ours.task_id} ({folder})"
    # resume reads the task back from the folder the session names, not the suite
    resumed = sessions[on_folder]
    assert resolve_task(resumed.task_dir or resumed.task_id).folder == folder
    assert task_argument(resumed.task_id, resumed.task_dir) == str(folder)
    # one kernel file each in the workbench
    assert workbench_name(builtin) == builtin.task_id
    assert workbench_name(ours).startswith(f"{ours.task_id}-")
    other = tmp_path / "elsewhere" / BUILTIN.name
    shutil.copytree(BUILTIN, other)
    assert (
        len({workbench_name(builtin), workbench_name(ours), workbench_name(load_task(other))}) == 3
    )


def test_a_session_stored_before_its_start_event_keeps_its_id(tmp_path) -> None:
    with Store(tmp_path / "sessions.db") as store:
        session = store.create_session("12p_RMSNorm", "hitl")
        assert store.session(session.id).task_dir == ""
        assert session_cells(store.list_sessions()[0])[1] == "12p_RMSNorm"


def test_an_exported_kernel_answers_to_the_name_its_tasks_harness_calls(tmp_path) -> None:
    """The built-in agent names its kernel `computation`; a JAXBench task's harness calls
    `workload`: the export names it so too (and adds nothing where the name is there already, or
    the task's entry point is `computation`)."""
    import ast

    from maxkernel_tui.kernels.loader import defined_names
    from tests.support.task_folders import write_jaxbench, write_plain

    jaxbench = write_jaxbench(tmp_path / "jaxbench", expert=False)
    plain = write_plain(tmp_path / "plain", "41k_Gemm_Add_ReLU")
    exported: dict[str, str] = {}
    with Store(tmp_path / "sessions.db") as store:
        for name, folder in [("jaxbench", jaxbench), ("plain", plain)]:
            session_id = a_session(store, load_task(folder).task_id, folder)
            (kernel,) = [
                p for p in export_session(store, session_id, tmp_path / name) if p.suffix == ".py"
            ]
            exported[name] = kernel.read_text()
        named = store.create_session("gemm", "hitl")
        store.append_event(
            named.id, "session_started", {"task_id": "gemm", "task_dir": str(jaxbench)}
        )
        store.add_kernel_version(named.id, "def workload(x, w):\n    return x @ w\n")
        (kernel,) = [
            p for p in export_session(store, named.id, tmp_path / "named") if p.suffix == ".py"
        ]
        exported["named"] = kernel.read_text()
    assert "workload" in defined_names(ast.parse(exported["jaxbench"]))
    assert (
        exported["jaxbench"]
        .rstrip()
        .endswith("workload = computation  # the name the task's own harness calls")
    )
    assert "workload" not in exported["plain"] and "= computation" not in exported["named"]
