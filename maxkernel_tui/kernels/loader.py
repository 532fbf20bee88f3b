"""Reads task folders in the JaxBench / MaxKernel adapted format, unmodified. No jax here.

A task folder holds `kernel_task.yaml` (task_id, description, input_gen_code, atol, rtol) and
`reference.py` (get_inputs, computation). Our own tasks add, all optional:
  - yaml `category` and `operation` (short labels for listings);
  - yaml `atol`/`rtol` as a mapping from configuration name to a number;
  - reference.py `CONFIGS = {"bench": {...}, "check": {...}, "heldout": {...}}` with
    `get_inputs(config="bench", seed=0)`; called without arguments it still gives the
    production inputs, so other harnesses read our tasks as they are.
Everything here is static (YAML and Python AST): no task code runs in this process. A derived
task whose coinciding sizes were traced (kernels/traced_ties.py) is planned with what tracing
told.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from maxkernel_tui.kernels.config_names import BENCH
from maxkernel_tui.kernels.limits import file_oversize_problem
from maxkernel_tui.kernels.task import (
    DEFAULT_TOLERANCE,
    EXPERT_PY,
    JAXBENCH_BASELINE,
    REFERENCE_PY,
    TASK_YAML,
    Task,
    TaskError,
    TaskFormat,
    Tolerance,
)
from maxkernel_tui.kernels.traced_ties import Groups, known_groups

if TYPE_CHECKING:
    from maxkernel_tui.kernels.derive.plan import Derivation

SUITE_DIR = Path(__file__).resolve().parent / "suite"
# The built-in training tasks (forward and backward judged), a group of their own beside the
# 50 JAXBench tasks of SUITE_DIR, so that everything counting those stays true.
TRAINING_DIR = Path(__file__).resolve().parent / "suite_training"

_ID_CATEGORY = (
    (re.compile(r"^\d+p_"), "production"),
    (re.compile(r"^\d+k_"), "kernelbench"),
    (re.compile(r"^\d+t_"), "training"),
)


def builtin_suite_dir() -> Path:
    return SUITE_DIR


def builtin_training_dir() -> Path:
    return TRAINING_DIR


def builtin_task_dirs() -> tuple[Path, ...]:
    """Every built-in group of tasks: the 50 JAXBench tasks, then the training tasks."""
    return (SUITE_DIR, TRAINING_DIR)


def load_task(folder: Path | str, *, traced_ties: bool = True, cache: Path | None = None) -> Task:
    """Read one task folder; raise TaskError naming the file and the problem. `traced_ties`:
    plan a derived task with the ties tracing its reference found, where known (the describe
    worker, which traces them, starts from the static plan): beside a snapshot's copy, else in
    `cache`, the user's, which only the UI and CLI processes name (a worker reads what travels
    with its snapshot, never a path its sandbox refuses)."""
    task = _read_task(Path(folder))
    return with_known_ties(task, cache) if traced_ties else task


def with_known_ties(task: Task, cache: Path | None) -> Task:
    """`task` planned with the groups tracing its reference told (traced_ties.py: beside a
    snapshot's copy, else in `cache`), where they are known and could matter (two sizes share a
    production value); else `task` itself."""
    derivation = task.derivation
    if derivation is None or not derivation.derived or not derivation.coinciding():
        return task
    groups = known_groups(task, cache)
    if groups is None or groups == derivation.groups:
        return task
    return with_groups(task, groups)


def with_groups(task: Task, groups: Groups) -> Task:
    """`task` with its derivation planned anew from `groups` (which sizes of one production
    value the reference ties); `task` itself where that plan derives nothing."""
    from maxkernel_tui.kernels.derive.plan import plan_derivation

    assert task.derivation is not None
    tree = parse_python(task.reference_path)
    planned = plan_derivation(tree, task.derivation.builder, groups)
    if not planned.derived or planned.configs() != task.derivation.configs():
        return task
    return replace(task, derivation=planned)


def _read_task(folder: Path) -> Task:
    if not folder.exists():
        raise TaskError(folder, "no such task folder (the path does not exist)")
    if not folder.is_dir():
        raise TaskError(folder, "not a task folder (a file, not a folder)")
    if not (folder / TASK_YAML).exists() and (folder / JAXBENCH_BASELINE).is_file():
        from maxkernel_tui.kernels.jaxbench_native import load_jaxbench_task

        return load_jaxbench_task(folder, parse_python(folder / JAXBENCH_BASELINE))
    if not any((folder / name).exists() for name in (TASK_YAML, REFERENCE_PY)):
        raise TaskError(
            folder,
            f"not a task folder: it holds neither {TASK_YAML} with {REFERENCE_PY} (MaxKernel's "
            f"format) nor {JAXBENCH_BASELINE} (JAXBench's)",
        )
    meta = read_yaml(folder / TASK_YAML)
    reference = parse_python(folder / REFERENCE_PY)

    task_id = meta.get("task_id")
    if not isinstance(task_id, str) or not task_id.strip():
        raise TaskError(folder / TASK_YAML, "missing or empty `task_id`")
    description = str(meta.get("description") or "").strip()

    names = defined_names(reference)
    if "computation" not in names:
        raise TaskError(folder / REFERENCE_PY, "does not define `computation`")
    inputs_from_yaml = "get_inputs" not in names
    if inputs_from_yaml:
        _require_yaml_get_inputs(folder / TASK_YAML, meta.get("input_gen_code"))

    declared = _declared_configs(folder / REFERENCE_PY, reference)
    named = declared is not None
    config_names = declared if declared is not None else _plain_configs(meta)
    tolerances = _tolerances(folder / TASK_YAML, meta, config_names)
    derivation = None if named else _plain_derivation(reference, inputs_from_yaml, config_names)
    gradient_tolerances = _gradient_tolerances(folder / TASK_YAML, meta, config_names)
    if derivation is not None and derivation.derived:
        named, config_names = True, derivation.configs()
        tolerances = {name: tolerances[BENCH] for name in config_names}
        if gradient_tolerances:
            gradient_tolerances = {name: gradient_tolerances[BENCH] for name in config_names}

    return Task(
        task_id=task_id.strip(),
        folder=folder.resolve(),
        description=description,
        category=str(meta.get("category") or category_from_id(task_id)),
        operation=str(meta.get("operation") or first_sentence(description)),
        configs=config_names,
        tolerances=tolerances,
        named_configs=named,
        inputs_from_yaml=inputs_from_yaml,
        expert_path=_expert_path(folder.resolve()),
        source_format=TaskFormat.OURS if derivation is None else TaskFormat.PLAIN,
        derivation=derivation,
        gradients=gradient_names(
            folder / TASK_YAML, meta.get("gradients"), computation_parameters(reference)
        ),
        gradient_tolerances=gradient_tolerances,
    )


def computation_parameters(
    reference: ast.Module, entry_points: tuple[str, ...] = ("computation",)
) -> tuple[str, ...]:
    """The positional parameter names of the reference's entry point: the first of
    `entry_points` it defines (JAXBench's baseline calls it `workload`; last definition wins)."""
    for name in entry_points:
        params: tuple[str, ...] | None = None
        for node in reference.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                params = tuple(a.arg for a in node.args.posonlyargs + node.args.args)
        if params is not None:
            return params
    return ()


def gradient_names(path: Path, declared: object, parameters: tuple[str, ...]) -> tuple[str, ...]:
    """The yaml's (or an option's) `gradients`: a list of `computation`'s parameter names, or a
    comma-separated string of them; absent means forward only."""
    if declared is None:
        return ()
    if isinstance(declared, str):
        declared = [n.strip() for n in declared.split(",") if n.strip()]
    if not isinstance(declared, list) or not all(isinstance(n, str) for n in declared):
        raise TaskError(path, "`gradients` must be a list of computation's parameter names")
    unknown = [n for n in declared if n not in parameters]
    if unknown:
        raise TaskError(
            path,
            f"`gradients` names {unknown}, which are not parameters of computation"
            f"({', '.join(parameters)})",
        )
    if len(set(declared)) != len(declared):
        raise TaskError(path, f"`gradients` repeats a name: {declared}")
    return tuple(declared)


def _expert_path(folder: Path) -> Path | None:
    expert = folder / EXPERT_PY
    return expert if expert.is_file() else None


def _plain_derivation(
    reference: ast.Module, inputs_from_yaml: bool, configs: tuple[str, ...]
) -> Derivation:
    """check and heldout for a plain task, or why it keeps only its production inputs."""
    # the derivation loads with the first plain task: the built-in suite's tasks declare theirs
    from maxkernel_tui.kernels.derive.plan import Derivation, plan_derivation

    if inputs_from_yaml:
        return Derivation("get_inputs", fallback="get_inputs lives in the yaml's input_gen_code")
    if configs != (BENCH,):
        return Derivation("get_inputs", fallback=f"get_inputs gives {len(configs)} inputs")
    return plan_derivation(reference, "get_inputs")


def load_tasks(root: Path | str, cache: Path | None = None) -> tuple[list[Task], list[TaskError]]:
    """Every task folder directly under `root`, sorted by id number; bad ones as errors
    (`cache`: as load_task's)."""
    root = Path(root)
    if not root.is_dir():
        raise TaskError(root, "no such directory of tasks")
    tasks: list[Task] = []
    errors: list[TaskError] = []
    for folder in sorted(p for p in root.iterdir() if _looks_like_task(p)):
        try:
            tasks.append(load_task(folder, cache=cache))
        except TaskError as error:
            errors.append(error)
    tasks.sort(key=lambda t: _id_sort_key(t.task_id))
    return tasks, errors


def find_task(task_id: str, tasks: Iterable[Task]) -> Task:
    """The task with this id, or with this unique id prefix (`12p` finds `12p_RMSNorm`)."""
    tasks = list(tasks)
    for task in tasks:
        if task.task_id == task_id:
            return task
    matches = [t for t in tasks if t.task_id.split("_", 1)[0] == task_id]
    if len(matches) == 1:
        return matches[0]
    raise KeyError(f"no task {task_id!r}")


def _looks_like_task(path: Path) -> bool:
    return path.is_dir() and not path.name.startswith((".", "_"))


def _id_sort_key(task_id: str) -> tuple[int, int, str]:
    match = re.match(r"^(\d+)([a-z]?)_", task_id)
    if not match:
        return (1, 0, task_id)
    return (0, int(match.group(1)), task_id)


def read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise TaskError(path, "missing file")
    _refuse_oversize(path)
    try:
        meta = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise TaskError(path, f"invalid YAML{where}: {getattr(error, 'problem', error)}") from None
    if not isinstance(meta, dict):
        raise TaskError(path, "expected a mapping of fields (task_id, description, ...)")
    return meta


def _refuse_oversize(path: Path) -> None:
    if too_large := file_oversize_problem(path, path.name):
        raise TaskError(path, too_large)


def parse_python(path: Path, source: str | None = None) -> ast.Module:
    """The module's AST; a missing, oversized or broken file is a TaskError naming it."""
    if source is None:
        if not path.is_file():
            raise TaskError(path, "missing file")
        _refuse_oversize(path)
        source = path.read_text(encoding="utf-8")
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as error:
        raise TaskError(path, f"does not parse: {error.msg} at line {error.lineno}") from None


def defined_names(module: ast.Module) -> set[str]:
    """Top-level functions and assignments (`computation = jax.jit(_impl)` counts)."""
    names: set[str] = set()
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _function(module: ast.Module, name: str) -> ast.FunctionDef | None:
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _require_yaml_get_inputs(path: Path, code: object) -> None:
    if not isinstance(code, str) or not code.strip():
        raise TaskError(path, "no `get_inputs` in reference.py and no `input_gen_code` here")
    if "get_inputs" not in defined_names(parse_python(path, code)):
        raise TaskError(path, "`input_gen_code` does not define `get_inputs`")


def _declared_configs(path: Path, module: ast.Module) -> tuple[str, ...] | None:
    """Names in `CONFIGS = {...}` when get_inputs takes a configuration; else None."""
    get_inputs = _function(module, "get_inputs")
    if get_inputs is None or not get_inputs.args.args:
        return None
    for node in module.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "CONFIGS" for t in node.targets
        ):
            if not isinstance(node.value, ast.Dict) or not all(
                isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.value.keys
            ):
                raise TaskError(path, "`CONFIGS` must be a dict literal with string keys")
            names = tuple(k.value for k in node.value.keys)  # type: ignore[union-attr]
            if BENCH not in names:
                raise TaskError(path, f"`CONFIGS` has no {BENCH!r} (production) configuration")
            return names
    return None


def _plain_configs(meta: dict[str, Any]) -> tuple[str, ...]:
    """Plain adapted format: one production input, or one per entry of a tolerance list."""
    lengths = {len(meta[k]) for k in ("atol", "rtol") if isinstance(meta.get(k), list)}
    count = max(lengths, default=1)
    if count == 1:
        return (BENCH,)
    return tuple(f"{BENCH}.{i}" for i in range(count))


def _tolerances(path: Path, meta: dict[str, Any], configs: tuple[str, ...]) -> dict[str, Tolerance]:
    atol = _per_config(path, "atol", meta.get("atol", DEFAULT_TOLERANCE), configs)
    rtol = _per_config(path, "rtol", meta.get("rtol", DEFAULT_TOLERANCE), configs)
    return {name: Tolerance(atol[name], rtol[name]) for name in configs}


def _gradient_tolerances(
    path: Path, meta: dict[str, Any], configs: tuple[str, ...]
) -> dict[str, Tolerance]:
    """The yaml's `grad_atol`/`grad_rtol` (each as `atol`/`rtol` may be written; one left out
    is the forward's), or {} where neither is given: gradients then keep the forward's."""
    if "grad_atol" not in meta and "grad_rtol" not in meta:
        return {}
    forward = _tolerances(path, meta, configs)
    atol, rtol = (
        _per_config(path, key, meta[key], configs) if key in meta else {}
        for key in ("grad_atol", "grad_rtol")
    )
    return {
        name: Tolerance(atol.get(name, forward[name].atol), rtol.get(name, forward[name].rtol))
        for name in configs
    }


def _per_config(path: Path, key: str, value: object, configs: tuple[str, ...]) -> dict[str, float]:
    if _is_number(value):
        return {name: _number(path, key, value) for name in configs}
    if isinstance(value, list):
        if len(value) == 1:
            return _per_config(path, key, value[0], configs)
        if len(value) != len(configs):
            raise TaskError(path, f"`{key}` lists {len(value)} values for {len(configs)} inputs")
        return {name: _number(path, key, v) for name, v in zip(configs, value)}
    if isinstance(value, dict):
        missing = [name for name in configs if name not in value]
        if missing:
            raise TaskError(path, f"`{key}` has no value for configuration(s) {missing}")
        return {name: _number(path, key, value[name]) for name in configs}
    raise TaskError(path, f"`{key}` must be a number, a list or a mapping, not {value!r}")


def _is_number(value: object) -> bool:
    """Numbers, and strings such as `1e-5` that YAML 1.1 (PyYAML) leaves unparsed."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    try:
        float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return isinstance(value, str)


def _number(path: Path, key: str, value: object) -> float:
    if not _is_number(value):
        raise TaskError(path, f"`{key}` entry {value!r} is not a number")
    return float(value)  # type: ignore[arg-type]


def category_from_id(task_id: str) -> str:
    for pattern, category in _ID_CATEGORY:
        if pattern.match(task_id):
            return category
    return "custom"


def first_sentence(text: str, limit: int = 60) -> str:
    sentence = re.split(r"(?<=[.:;])\s|\n", text.strip(), maxsplit=1)[0]
    return sentence if len(sentence) <= limit else sentence[: limit - 1] + "…"
