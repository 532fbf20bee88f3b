"""The task model: what a benchmark task is, independent of how it is run. No jax here."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

TASK_YAML = "kernel_task.yaml"
REFERENCE_PY = "reference.py"
EXPERT_PY = "expert.py"  # a suite task's expert baseline (jax's own Pallas kernel, tuned)

# The configurations our own tasks declare. External tasks in the plain adapted format only
# have production shapes, named `bench` (or `bench.0`, `bench.1`, ... for a list of inputs).
BENCH = "bench"
CHECK = "check"
HELDOUT = "heldout"

DEFAULT_TOLERANCE = 1e-3  # what MaxKernel's harness uses when a yaml omits atol/rtol


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
    # The task's expert kernel, a baseline beside XLA (a suite expert.py, JAXBench's optimized.py).
    expert_path: Path | None = None

    @property
    def yaml_path(self) -> Path:
        return self.folder / TASK_YAML

    @property
    def reference_path(self) -> Path:
        return self.folder / REFERENCE_PY

    def tolerance(self, config: str) -> Tolerance:
        return self.tolerances[config]

    def agent_visible_configs(self) -> tuple[str, ...]:
        """Configurations an agent may see; held-out shapes never reach a prompt."""
        return tuple(c for c in self.configs if c != HELDOUT)

    def with_extra_configs(self, names: tuple[str, ...]) -> Task:
        """This task with extra check configurations (edge cases), each judged with the `check`
        tolerance: they are check-sized shapes, so the same numerical slack applies."""
        clashes = [n for n in names if n in self.configs]
        if clashes:
            raise TaskError(
                self.reference_path, f"extra configuration(s) {clashes} clash with CONFIGS"
            )
        tolerance = self.tolerances.get(CHECK) or next(iter(self.tolerances.values()))
        return replace(
            self,
            configs=self.configs + tuple(names),
            tolerances={**self.tolerances, **{n: tolerance for n in names}},
        )
