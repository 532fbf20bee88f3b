"""A task plus its description as a record (for JSON) and as text (for a terminal). No jax."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from maxkernel_tui.kernels.config_names import BENCH
from maxkernel_tui.kernels.report.basis import Basis
from maxkernel_tui.kernels.task import Task

if TYPE_CHECKING:  # the workbench's first frame labels configurations, without descriptions
    from maxkernel_tui.kernels.description import (
        ConfigShapes,
        TaskDescription,
        TensorSpec,
        XlaCost,
    )

_SHORT_DTYPES = {
    "bfloat16": "bf16",
    "float32": "f32",
    "float16": "f16",
    "int32": "i32",
    "float64": "f64",
    "int64": "i64",
    "int8": "i8",
    "bool": "bool",
}


TRAINING_GROUP = "training tasks (forward and backward judged)"
FORWARD_GROUP = "forward tasks"


def task_group(task: Task) -> str:
    """The group a listing shows a task in: training tasks (gradients judged) apart."""
    return TRAINING_GROUP if task.gradients else FORWARD_GROUP


def cost_provenance(cost: XlaCost) -> str:
    """Every figure says where it came from: these are the compiler's estimates."""
    libtpu = f", libtpu {cost.libtpu}" if cost.libtpu else ""
    return f"estimated: XLA cost analysis, ahead-of-time compile for TPU {cost.target}{libtpu}"


def task_record(task: Task, description: TaskDescription) -> dict[str, Any]:
    """The task and its description as `tasks --json` prints it."""
    record: dict[str, Any] = {
        "task_id": task.task_id,
        "category": task.category,
        "operation": task.operation,
        "description": task.description,
        "folder": str(task.folder),
        "tolerances": {c: {"atol": t.atol, "rtol": t.rtol} for c, t in task.tolerances.items()},
    }
    record.update(format=task.source_format, warnings=list(task.warnings))
    if task.gradients:
        record.update(gradients=list(task.gradients))
    if task.expert_path is not None:
        record.update(expert=str(task.expert_path))
    if description.error is not None:
        return dict(record, error=description.error)
    record.update(
        configs={
            name: dict(c.to_json(), derived=is_derived(task, name))
            for name, c in description.configs.items()
        }
    )
    if task.derivation is not None:
        record.update(derivation=derivation_record(task))
    if description.declared_flops is not None:
        record.update(declared_flops=description.declared_flops)
    cost = description.cost
    if cost is not None and cost.error is None:
        record.update(cost=dict(cost.to_json(), kind=Basis.ESTIMATED, source=cost_provenance(cost)))
    elif cost is not None:
        record.update(cost=cost.to_json())
    return record


def is_derived(task: Task, config: str) -> bool:
    """A configuration we derived from the production sizes (not one the task declares)."""
    return task.derived and config != BENCH


def config_label(task: Task, config: str) -> str:
    """`check (derived)` where we derived it, else the name."""
    return f"{config} (derived)" if is_derived(task, config) else config


def derivation_record(task: Task) -> dict[str, Any]:
    derivation = task.derivation
    assert derivation is not None
    return {
        "derived": derivation.derived,
        "from": derivation.builder,
        "sizes": derivation.sizes,
        "ties": list(derivation.ties),
        # sizes of one production value as tracing the reference grouped them: each group
        # moves on its own at heldout (empty: not traced, or nothing to tell apart)
        "traced_groups": [list(group) for group in derivation.groups],
        "seeded_keys": derivation.keys,
        "fallback": derivation.fallback,
    }


def format_task(task: Task, description: TaskDescription) -> str:
    lines = [f"{task.task_id}  [{task.category}]  {task.operation}"]
    lines += [f"  note: {note}" for note in task.format_notes]
    if task.gradients:
        lines.append(f"  gradients judged: {', '.join(task.gradients)} (forward and backward)")
    derivation = task.derivation.warnings() if task.derivation is not None else ()
    lines += [f"  warning: {warning}" for warning in derivation]
    if description.error is not None:
        lines.append(f"  error: {description.error}")
        return "\n".join(lines)
    labels = {name: config_label(task, name) for name in description.configs}
    width = max(len(label) for label in labels.values())
    for name, config in description.configs.items():
        inputs = " ".join(format_spec(s) for s in config.inputs)
        static = f"  static {tuple(config.static)}" if config.static else ""
        outputs = " ".join(format_spec(s) for s in config.outputs)
        ran = _validated(config)
        lines.append(f"  {labels[name]:<{width}}  {inputs}{static} -> {outputs}{ran}")
    if description.declared_flops is not None:
        lines.append(f"  flops: {_si(description.declared_flops, 'FLOP')} (the task's get_flops())")
    if description.cost is not None:
        lines.append("  " + format_cost(description.cost))
    return "\n".join(lines)


def format_cost(cost: XlaCost) -> str:
    if cost.error is not None:
        return f"XLA cost: unavailable ({cost.error})"
    moved = (
        "; does not fit " + ", ".join(d.target for d in cost.did_not_fit)
        if cost.did_not_fit
        else ""
    )
    return (
        f"XLA cost on {cost.target}: {_si(cost.flops, 'FLOP')}, "
        f"{_si(cost.bytes_accessed, 'B')} accessed, "
        f"roofline {_seconds(cost.optimal_seconds)} ({cost_provenance(cost)}{moved})"
    )


def _validated(config: ConfigShapes) -> str:
    """How a derived configuration was validated: its reference run, and making its inputs."""
    if config.reference_seconds is None:
        return ""
    inputs = (
        f", its inputs {config.inputs_seconds:.2f} s" if config.inputs_seconds is not None else ""
    )
    return (
        f"  (validated: reference {config.reference_seconds:.2f} s here, compile included"
        f"{inputs}; measured)"
    )


def format_spec(spec: TensorSpec) -> str:
    dtype = _SHORT_DTYPES.get(spec.dtype, spec.dtype)
    return f"{dtype}[{','.join(str(d) for d in spec.shape)}]"


def _si(value: float | None, unit: str) -> str:
    if value is None:
        return f"? {unit}"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value * 1e3:.3f} ms" if value < 1 else f"{value:.2f} s"
