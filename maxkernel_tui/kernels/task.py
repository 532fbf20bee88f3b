"""The task model: what a benchmark task is, independent of how it is run. No jax here."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from maxkernel_tui.kernels.config_names import CHECK, HELDOUT

if TYPE_CHECKING:
    from maxkernel_tui.kernels.derive.plan import Derivation

TASK_YAML = "kernel_task.yaml"
REFERENCE_PY = "reference.py"
EXPERT_PY = "expert.py"  # a suite task's expert baseline (jax's own Pallas kernel, tuned)

IMPORTED_CATEGORY = "imported"  # what `tasks import` writes as a task's category

# The names a candidate of our own or MaxKernel's format may define as its entry point.
DEFAULT_ENTRY_POINTS = ("computation",)

DEFAULT_TOLERANCE = 1e-3  # what MaxKernel's harness uses when a yaml omits atol/rtol


class TaskFormat(StrEnum):
    """How a task folder is written."""

    OURS = "ours"  # CONFIGS with check/heldout
    PLAIN = "plain"  # MaxKernel's adapted format: production shapes only
    JAXBENCH = "jaxbench"  # JAXBench's native `baseline.py`


JAXBENCH_BASELINE = "baseline.py"
JAXBENCH_EXPERT = "optimized.py"
JAXBENCH_TOLERANCE = 1e-2  # JAXBench's own harness: allclose(atol=1e-2, rtol=1e-2)
JAXBENCH_INPUTS_NOTE = (
    "inputs built as JAXBench's harness builds them: create_inputs(dtype=jnp.bfloat16)"
)


class TaskImportError(Exception):
    """Source that cannot become a task; the message names the file, the line and the problem."""


class TaskError(Exception):
    """A task folder that cannot be used; the message names the file and the problem."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


@dataclass(frozen=True)
class Task:
    """A task folder, read and validated without running any of its code."""

    task_id: str
    folder: Path
    description: str
    category: str
    operation: str
    configs: tuple[str, ...]
    tolerances: dict[str, Tolerance] = field(hash=False)
    # True when reference.py declares CONFIGS and get_inputs(config, seed): our extension.
    named_configs: bool = False
    # Where get_inputs comes from: reference.py, or the yaml's input_gen_code.
    inputs_from_yaml: bool = False
    source_format: TaskFormat = TaskFormat.OURS
    reference_file: str = REFERENCE_PY
    # The names a candidate may define as its entry point (JAXBench's files call it workload).
    entry_points: tuple[str, ...] = DEFAULT_ENTRY_POINTS
    # check/heldout derived from the production sizes (plain and JAXBench tasks), or why not.
    derivation: Derivation | None = field(default=None, hash=False, compare=False)
    # The task's expert kernel (a JAXBench `optimized.py` beside the baseline), if any.
    expert_path: Path | None = None
    format_notes: tuple[str, ...] = ()
    # Parameters of the reference's `computation` whose gradients are judged (training tasks);
    # empty: forward only.
    gradients: tuple[str, ...] = ()
    # The yaml's `grad_atol`/`grad_rtol` per configuration; a configuration not here judges its
    # gradients with its forward tolerance (gradient_tolerance).
    gradient_tolerances: dict[str, Tolerance] = field(default_factory=dict, hash=False)

    @property
    def yaml_path(self) -> Path:
        return self.folder / TASK_YAML

    @property
    def reference_path(self) -> Path:
        return self.folder / self.reference_file

    @property
    def defining_files(self) -> tuple[Path, ...]:
        """The files whose content is the task (for cache keys): yaml, reference, expert."""
        files = [self.yaml_path] if self.source_format != TaskFormat.JAXBENCH else []
        files.append(self.reference_path)
        if self.expert_path is not None:
            files.append(self.expert_path)
        return tuple(files)

    @property
    def derived(self) -> bool:
        """Whether check and heldout were derived from production sizes (not declared)."""
        return self.derivation is not None and self.derivation.derived

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the listing and every report say about how this task is judged."""
        derived = self.derivation.warnings() if self.derivation is not None else ()
        return self.format_notes + derived

    def tolerance(self, config: str) -> Tolerance:
        return self.tolerances[config]

    def gradient_tolerance(self, config: str) -> Tolerance:
        """The tolerance the gradients at `config` are judged with: the yaml's `grad_atol` and
        `grad_rtol` where given, else the forward outputs' own."""
        return self.gradient_tolerances.get(config) or self.tolerance(config)

    def agent_visible_configs(self) -> tuple[str, ...]:
        """Configurations an agent may see; held-out shapes never reach a prompt."""
        return tuple(c for c in self.configs if c != HELDOUT)

    def with_gradients(self, names: tuple[str, ...]) -> Task:
        """This task judged on the gradients of `names` too (the option for a folder read as it
        is); names must already be checked against the reference (`gradient_names`)."""
        return replace(self, gradients=names)

    def with_extra_configs(self, names: tuple[str, ...]) -> Task:
        """This task with extra check configurations (edge cases), each judged with the `check`
        tolerance: they are check-sized shapes, so the same numerical slack applies."""
        clashes = [n for n in names if n in self.configs]
        if clashes:
            raise TaskError(
                self.reference_path, f"extra configuration(s) {clashes} clash with CONFIGS"
            )
        tolerance = self.tolerances.get(CHECK) or next(iter(self.tolerances.values()))
        gradient = self.gradient_tolerances.get(CHECK)
        return replace(
            self,
            configs=self.configs + tuple(names),
            tolerances={**self.tolerances, **{n: tolerance for n in names}},
            gradient_tolerances={
                **self.gradient_tolerances,
                **({n: gradient for n in names} if gradient is not None else {}),
            },
        )
