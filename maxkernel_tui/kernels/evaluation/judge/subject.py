"""The task and a candidate's carried programs as every check of the judge sees them, each
program loaded and checked against the task when first used. Imports jax."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
from jax.extend.core import ClosedJaxpr, jaxpr_as_fun

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation import gradients
from maxkernel_tui.kernels.evaluation.tracer.carried import (
    ProgramRefused,
    checked_backward,
    checked_program,
)


class Refused(Exception):
    """A carried program the judge does not run: the trace check fails with this detail."""


class Untraced(Refused):
    """No program at a configuration because the kernel could not be traced there (the
    tracer's reason): the kernel's own failure, judged where that configuration is run."""


@dataclass
class Subject:
    """The task and the candidate's carried programs, as every check sees them."""

    task: Any
    reference: Any  # the reference module
    files: dict[str, str]  # configuration: the tracer's file of its program there
    untraced: dict[str, str]  # configuration: why the tracer has no program there
    specs: Any  # dynamic inputs at production shapes (jax.ShapeDtypeStruct)
    static: Any  # static arguments at production shapes
    expected: list[Any]  # the reference's output avals at production shapes
    bench: str  # the production configuration
    loaded: dict[str, ClosedJaxpr] = dataclasses.field(default_factory=dict)
    # Where the task asks for gradients: the backward programs' files (configuration: file) and
    # the requested parameters' positions among computation's arguments (gradients.py).
    backward_files: dict[str, str] = dataclasses.field(default_factory=dict)
    at: tuple[int, ...] = ()
    loaded_backward: dict[str, ClosedJaxpr] = dataclasses.field(default_factory=dict)

    def backward(self, config: str) -> ClosedJaxpr:
        """The candidate's backward program at `config`, checked as `program` is."""
        if config in self.loaded_backward:
            return self.loaded_backward[config]
        self.program(config)  # no backward where the forward is refused or untraced
        where = "production shapes" if config == self.bench else f"{config!r} shapes"
        if config not in self.backward_files:
            raise Refused(f"the tracer sent no backward program at {where}")
        try:
            program = checked_backward(
                Path(self.backward_files[config]),
                self.task,
                self.reference,
                config,
                where,
                self.at,
            )
        except ProgramRefused as refusal:
            raise Refused(str(refusal)) from None
        self.loaded_backward[config] = program
        return program

    def backward_specs(self, config: str) -> list[Any]:
        """The backward program's inputs at `config`: the dynamic inputs, then the cotangents."""
        specs, _, expected = runtime.io_specs(self.task, self.reference, config)
        return [*jax.tree.leaves(specs), *gradients.cotangent_specs(expected)]

    def program(self, config: str) -> ClosedJaxpr:
        """The candidate's program at `config`, once its inputs and outputs are the task's
        there; Refused otherwise (a missing, unreadable or mismatched program)."""
        if config in self.loaded:
            return self.loaded[config]
        where = "production shapes" if config == self.bench else f"{config!r} shapes"
        if config in self.untraced:
            raise Untraced(self.untraced[config])
        if config not in self.files:
            raise Refused(f"the tracer sent no program at {where}")
        try:
            program = checked_program(
                Path(self.files[config]), self.task, self.reference, config, where
            )
        except ProgramRefused as refusal:
            raise Refused(str(refusal)) from None
        self.loaded[config] = program
        return program

    def function(self, config: str) -> Callable[..., Any]:
        """The program at `config` as a function of the task's dynamic inputs (pytrees)."""
        run = jaxpr_as_fun(self.program(config))
        return lambda *dynamic: run(*jax.tree.leaves(dynamic))
