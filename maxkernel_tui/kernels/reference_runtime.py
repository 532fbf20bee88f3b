"""Runs a task's own code: get_inputs, shapes via eval_shape, the reference. Imports jax.

Only worker processes import this module; the UI and the CLI front end never do.
"""

from __future__ import annotations

import inspect
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from maxkernel_tui.kernels.config_names import BENCH
from maxkernel_tui.kernels.derived_sizes import bind_candidate, install
from maxkernel_tui.kernels.task import Task, TaskError

StaticArgs = tuple[Any, ...]
_STATIC_TYPES = (bool, int, float, str, type(None))


def module_from_source(path: Path, name: str) -> ModuleType:
    """Execute a Python file as a fresh module, compiled from its current text. Import's
    bytecode cache is bypassed: it trusts mtime and size, so an edit of the same length within
    the same second would run the old code."""
    module = ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # registered so pickling and dataclasses work
    try:
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_reference(task: Task) -> ModuleType:
    """Execute reference.py as a fresh module."""
    try:
        module = module_from_source(
            task.reference_path, f"_maxkernel_task_{abs(hash(task.reference_path))}"
        )
    except Exception as error:  # any failure of user code is a task error, never a crash
        raise TaskError(task.reference_path, f"fails to import: {_describe(error)}") from None
    try:
        install(task, module)  # plain and JAXBench tasks: our CONFIGS, get_inputs, computation
    except TaskError:
        raise
    except Exception as error:
        raise TaskError(task.reference_path, f"cannot derive inputs: {_describe(error)}") from None
    if not callable(getattr(module, "computation", None)):
        raise TaskError(task.reference_path, "`computation` is not callable")
    return module


def load_candidate(task: Task, reference: ModuleType, path: Path) -> ModuleType:
    """A candidate kernel file as a fresh module whose `computation` takes the task's inputs
    (JAXBench candidates may define `workload` instead)."""
    candidate = module_from_source(path, "candidate_kernel")
    bind_candidate(task, reference, candidate)
    return candidate


def with_extra_configs(task: Task, module: ModuleType, extra: dict[str, dict[str, int]]) -> Task:
    """Add extra named configurations (edge cases) to the loaded reference's CONFIGS, and the task
    that knows them. The candidate's and the reference's workers both call this with the same
    parameters, so get_inputs builds the same arrays on both sides."""
    if not extra:
        return task
    configs = getattr(module, "CONFIGS", None)
    if not task.named_configs or not isinstance(configs, dict):
        raise TaskError(
            task.reference_path, "get_inputs takes no named configurations: no extra ones"
        )
    extended = task.with_extra_configs(tuple(extra))
    configs.update({name: dict(params) for name, params in extra.items()})
    return extended


def get_inputs_function(task: Task, module: ModuleType) -> Callable[..., Any]:
    """get_inputs from reference.py, or from the yaml's input_gen_code (jax, jnp in scope)."""
    if not task.inputs_from_yaml:
        found: Callable[..., Any] = module.get_inputs
        return found
    import yaml  # only needed for tasks whose get_inputs lives in the yaml

    code = yaml.safe_load(task.yaml_path.read_text(encoding="utf-8"))["input_gen_code"]
    namespace: dict[str, Any] = {"jax": jax, "jnp": jnp, "np": np}
    try:
        exec(compile(code, str(task.yaml_path), "exec"), namespace)
    except Exception as error:
        raise TaskError(task.yaml_path, f"input_gen_code fails: {_describe(error)}") from None
    get_inputs: Callable[..., Any] = namespace["get_inputs"]
    return get_inputs


def config_names(task: Task, module: ModuleType) -> tuple[str, ...]:
    """The task's configurations; a plain get_inputs() returning N pairs gives bench.0..N-1."""
    if task.named_configs:
        return task.configs
    count = _count_input_pairs(task, get_inputs_function(task, module))
    names = (BENCH,) if count == 1 else tuple(f"{BENCH}.{i}" for i in range(count))
    if task.configs not in ((BENCH,), names):
        raise TaskError(
            task.yaml_path,
            f"tolerances list {len(task.configs)} entries but "
            f"get_inputs() returns {count} input(s)",
        )
    return names


def make_inputs(
    task: Task, module: ModuleType, config: str, seed: int = 0
) -> tuple[tuple[Any, ...], StaticArgs]:
    """Real input arrays for one configuration (allocates)."""
    return _pair(task, _raw_inputs(task, get_inputs_function(task, module), config, seed), config)


def input_specs(
    task: Task, module: ModuleType, config: str
) -> tuple[tuple[jax.ShapeDtypeStruct, ...], StaticArgs]:
    """Shapes and dtypes of one configuration's inputs, via jax.eval_shape (no allocation)."""
    get_inputs = get_inputs_function(task, module)
    static_holder: list[StaticArgs] = []

    def dynamic_only() -> tuple[Any, ...]:
        dynamic, static = _pair(task, _raw_inputs(task, get_inputs, config, 0), config)
        static_holder.append(static)
        return dynamic

    try:
        specs = jax.eval_shape(dynamic_only)
    except TaskError:
        raise
    except Exception as error:
        raise TaskError(
            _inputs_file(task), f"get_inputs({config!r}) cannot be traced: {_describe(error)}"
        ) from None
    return tuple(specs), static_holder[0]


def output_specs(task: Task, module: ModuleType, config: str) -> Any:
    """Shapes and dtypes of the reference output for one configuration (no allocation)."""
    specs, static = input_specs(task, module, config)
    return _traced_outputs(task, module, config, specs, static)


def io_specs(
    task: Task, module: ModuleType, config: str
) -> tuple[tuple[jax.ShapeDtypeStruct, ...], StaticArgs, list[Any]]:
    """Input specs, static args and output leaves of one configuration, tracing get_inputs once."""
    specs, static = input_specs(task, module, config)
    return specs, static, jax.tree.leaves(_traced_outputs(task, module, config, specs, static))


def _traced_outputs(
    task: Task, module: ModuleType, config: str, specs: tuple[Any, ...], static: StaticArgs
) -> Any:
    check_signature(task, module.computation, len(specs), static)
    try:
        return jax.eval_shape(lambda *dynamic: module.computation(*dynamic, *static), *specs)
    except Exception as error:
        raise TaskError(
            task.reference_path, f"computation fails on {config!r} shapes: {_describe(error)}"
        ) from None


def check_signature(
    task: Task, computation: Callable[..., Any], n_dynamic: int, static: StaticArgs
) -> None:
    """computation(*dynamic_args, *static_args) must bind; say what does not match."""
    try:
        signature = inspect.signature(computation)
    except (TypeError, ValueError):
        return  # builtins and some wrapped callables have no signature to check
    try:
        signature.bind(*([None] * n_dynamic), *static)
    except TypeError as error:
        raise TaskError(
            task.reference_path,
            f"signature mismatch: computation{signature} cannot take {n_dynamic} array "
            f"argument(s) and {len(static)} static argument(s) from get_inputs ({error})",
        ) from None


def jitted_reference(module: ModuleType, n_dynamic: int, n_static: int) -> Callable[..., Any]:
    """The reference under jax.jit with every trailing static argument marked static."""
    return jax.jit(module.computation, static_argnums=tuple(range(n_dynamic, n_dynamic + n_static)))


def run_reference(
    task: Task, module: ModuleType, config: str, seed: int = 0
) -> tuple[tuple[Any, ...], StaticArgs, Any]:
    """(dynamic args, static args, output) of the reference on one configuration."""
    dynamic, static = make_inputs(task, module, config, seed)
    return dynamic, static, run_reference_on(task, module, config, dynamic, static)


def run_reference_on(
    task: Task, module: ModuleType, config: str, dynamic: tuple[Any, ...], static: StaticArgs
) -> Any:
    """The reference's output on inputs already made for `config`."""
    check_signature(task, module.computation, len(dynamic), static)
    try:
        output = jitted_reference(module, len(dynamic), len(static))(*dynamic, *static)
        return jax.block_until_ready(output)
    except Exception as error:
        raise TaskError(
            task.reference_path, f"computation fails on {config!r}: {_describe(error)}"
        ) from None


def _count_input_pairs(task: Task, get_inputs: Callable[..., Any]) -> int:
    """How many (dynamic, static) pairs a plain get_inputs() returns, traced, not allocated."""
    counted: list[int] = []

    def probe() -> int:
        produced = get_inputs()
        counted.append(len(produced) if isinstance(produced, list) else 1)
        return 0

    try:
        jax.eval_shape(probe)
    except Exception as error:
        raise TaskError(_inputs_file(task), f"get_inputs raised {_describe(error)}") from None
    return counted[0]


def _raw_inputs(task: Task, get_inputs: Callable[..., Any], config: str, seed: int) -> Any:
    try:
        if task.named_configs:
            if config not in task.configs:
                raise TaskError(task.reference_path, f"no configuration {config!r} in CONFIGS")
            params = inspect.signature(get_inputs).parameters
            return get_inputs(config, seed) if len(params) >= 2 else get_inputs(config)
        produced = get_inputs()
    except TaskError:
        raise
    except Exception as error:
        raise TaskError(_inputs_file(task), f"get_inputs raised {_describe(error)}") from None
    if isinstance(produced, list):
        index = 0 if config == BENCH else _list_index(task, config, len(produced))
        return produced[index]
    if config != BENCH:
        raise TaskError(_inputs_file(task), f"get_inputs() gives one input, not {config!r}")
    return produced


def _list_index(task: Task, config: str, count: int) -> int:
    prefix = f"{BENCH}."
    if (
        config.startswith(prefix)
        and config[len(prefix) :].isdigit()
        and int(config[len(prefix) :]) < count
    ):
        return int(config[len(prefix) :])
    raise TaskError(
        _inputs_file(task), f"no configuration {config!r} (get_inputs() returns {count})"
    )


def _pair(task: Task, produced: Any, config: str) -> tuple[tuple[Any, ...], StaticArgs]:
    where = _inputs_file(task)
    if not (isinstance(produced, (tuple, list)) and len(produced) == 2):
        raise TaskError(
            where,
            f"get_inputs({config!r}) must return (dynamic_args, static_args), "
            f"got {type(produced).__name__}",
        )
    dynamic, static = produced
    if not isinstance(dynamic, (tuple, list)) or not isinstance(static, (tuple, list)):
        raise TaskError(
            where, f"get_inputs({config!r}): dynamic and static args must be tuples or lists"
        )
    bad = [s for s in static if not isinstance(s, _STATIC_TYPES)]
    if bad:
        raise TaskError(
            where, f"get_inputs({config!r}): static args must be Python scalars, got {bad[:3]!r}"
        )
    return tuple(dynamic), tuple(static)


def _inputs_file(task: Task) -> Path:
    return task.yaml_path if task.inputs_from_yaml else task.reference_path


def _describe(error: BaseException) -> str:
    """`Type: message (file:line)` of the innermost frame, short enough for one line."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {message[:300]}{where}"
