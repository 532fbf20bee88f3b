"""How evaluations run is built in one place (`EvaluationSetup.of`): for the same settings the
`eval`, `profile` and `run` commands and the workbench's session (ctrl+e, ctrl+o, and the agents
it starts) get the same seeds, tiles, target, calibration and executor; a command's flags change
only what they name; and `eval` runs where the settings say (an unreachable Ray head is an error,
not a quiet local run)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from maxkernel_tui.agents.orchestration import session as session_module
from maxkernel_tui.agents.orchestration.tools import build_tools
from maxkernel_tui.cli import build_parser
from maxkernel_tui.commands import evaluate, profile
from maxkernel_tui.commands import run as run_command
from maxkernel_tui.config import load_settings
from maxkernel_tui.kernels.loader import find_task
from maxkernel_tui.kernels.report.checks import FAIL, Check, EvalReport
from maxkernel_tui.kernels.report.reasons import Problems, Reason, RuleBroken, StaticRule
from maxkernel_tui.kernels.service.service import KernelSource
from maxkernel_tui.kernels.service.setup import EvalOptions, EvaluationSetup
from maxkernel_tui.services.workbench_session import WorkbenchSession
from tests.support.cli import cli

KERNELS = Path(__file__).parents[1] / "data" / "kernels"


def configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str) -> None:
    """The user's config file says `config`; tiles come from the environment, as a user's do."""
    path = tmp_path / "config.toml"
    path.write_text(config)
    monkeypatch.setenv("MAXKERNEL_TUI_CONFIG", str(path))
    monkeypatch.setenv("MAXKERNEL_TUI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MAXKERNEL_TUI_TILE_BLOCKS", "3")


def parsed(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def run_command_setup(monkeypatch: pytest.MonkeyPatch, *argv: str) -> EvaluationSetup:
    """The setup `maxkernel-tui run` hands to the session it opens."""
    seen: list[EvaluationSetup] = []

    async def opening(*args: Any, setup: EvaluationSetup, **kwargs: Any) -> Any:
        seen.append(setup)
        raise ValueError("stopped by the test once the setup is known")

    monkeypatch.setattr(session_module, "open_session", opening)
    assert run_command.run(parsed("run", *argv)) == 2  # the stand-in's error
    (setup,) = seen
    return setup


def workbench_setup(settings: Any, task: Any, workdir: Path) -> EvaluationSetup:
    """The setup of the workbench's session (made on the event loop, as the screen makes it)."""

    async def made() -> EvaluationSetup:
        return WorkbenchSession(
            settings, task, workdir, harness=lambda: None, deliver=lambda *_: None
        ).setup

    return asyncio.run(made())


@pytest.mark.parametrize(
    ("config", "executor"),
    [
        ('tpu_target = "v6e"\n', "local workers"),
        ('tpu_target = "v4"\n[executor]\nray = "10.0.0.2:6379"\n', "Ray at 10.0.0.2:6379"),
    ],
)
def test_the_commands_and_the_workbench_build_the_same_setup_from_the_same_settings(
    tmp_path, monkeypatch, suite_tasks, config, executor
) -> None:
    configured(tmp_path, monkeypatch, config)
    settings = load_settings()
    workbench = workbench_setup(settings, find_task("12p", suite_tasks), tmp_path / "work")
    kernel = str(KERNELS / "honest" / "12p_RMSNorm.py")
    from_eval = evaluate.evaluation_setup(parsed("eval", kernel, "--task", "12p"))
    from_profile = profile.profile_setup(parsed("profile", kernel, "--task", "12p"))
    from_run = run_command_setup(monkeypatch, "--task", "12p")
    assert from_eval == from_profile == from_run == workbench
    assert workbench.options == EvalOptions(target=settings.tpu_target, tile_blocks=3)
    assert workbench.options.seeds == EvalOptions.seeds
    assert workbench.profile.targets == (settings.tpu_target,)
    assert workbench.profile.calibration_file is not None  # TPU timings calibrate every profile
    assert workbench.executor_words == executor


@pytest.mark.asyncio
async def test_the_workbench_tools_evaluate_with_the_commands_options(
    tmp_path, monkeypatch, suite_tasks
) -> None:
    """The service ctrl+e and ctrl+o run on, and the agents' tools, carry the setup's options."""
    configured(tmp_path, monkeypatch, 'tpu_target = "v5p"\n')
    session = WorkbenchSession(
        load_settings(),
        find_task("12p", suite_tasks),
        tmp_path / "work",
        harness=lambda: None,  # nothing is evaluated
        deliver=lambda *_: None,
    )
    service = await session.service()
    from_eval = evaluate.evaluation_setup(parsed("eval", "k.py", "--task", "12p"))
    assert service.options == from_eval.options and service.target == "v5p"
    direct = build_tools(from_eval, session.task, tmp_path)
    assert direct.options == service.options
    service.close()


def test_a_commands_flags_replace_only_what_they_name(tmp_path, monkeypatch) -> None:
    configured(tmp_path, monkeypatch, 'tpu_target = "v6e"\n')
    base = EvaluationSetup.of(load_settings())
    flagged = evaluate.evaluation_setup(
        parsed("eval", "k.py", "--task", "12p", "--seeds", "5", "--no-tiles", "--config", "check")
    )
    assert flagged.options == EvalOptions(target="v6e", seeds=5, tile_blocks=None, config="check")
    assert flagged.executor == base.executor and flagged.profile == base.profile
    tiles = evaluate.evaluation_setup(parsed("eval", "k.py", "--task", "12p", "--tiles", "7"))
    assert tiles.options.tile_blocks == 7 and tiles.options.seeds == base.options.seeds
    targets = profile.profile_setup(
        parsed("profile", "k.py", "--task", "12p", "--tpu", "v5e", "--tpu", "v4")
    )
    assert targets.profile.targets == ("v5e", "v4") and targets.options == base.options


def test_eval_runs_on_the_settings_ray_head_not_quietly_on_this_machine(
    tmp_path, monkeypatch
) -> None:
    """Before, `eval` built its own local harness whatever the settings said."""
    configured(tmp_path, monkeypatch, '[executor]\nray = "127.0.0.1:1"\n')
    kernel = str(KERNELS / "honest" / "12p_RMSNorm.py")
    done = cli("eval", kernel, "--task", "12p", cache=tmp_path, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "127.0.0.1:1" in done.stderr and "verdict" not in done.stdout


class RecordingHarness:
    """Stands in for `eval`'s harness: records the kernel it is given, and removes the user's
    file while it judges (nothing may read it again)."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self.given: list[KernelSource] = []

    def __call__(self, pool_size: int = 1) -> RecordingHarness:
        return self

    def __enter__(self) -> RecordingHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def evaluate(self, kernel: KernelSource, task, options, on_check=None) -> EvalReport:
        self.file.unlink()
        self.given.append(kernel)
        report = EvalReport(task.task_id, kernel.name, [options.target], "recorded")
        recorded = Problems((RuleBroken(StaticRule.NO_ENTRY_POINT, "recorded"),))
        report.add(Check("static", FAIL, Reason.STATIC_RULES_BROKEN, recorded))
        return report


def test_eval_reads_the_kernel_file_once_and_sends_its_text(tmp_path, monkeypatch, capsys):
    configured(tmp_path, monkeypatch, "")
    kernel = tmp_path / "mine.py"
    source = (KERNELS / "honest" / "12p_RMSNorm.py").read_text(encoding="utf-8")
    kernel.write_text(source, encoding="utf-8")
    harness = RecordingHarness(kernel)
    monkeypatch.setattr(evaluate, "Harness", harness)
    assert evaluate.run(parsed("eval", str(kernel), "--task", "12p", "--json")) == 1
    (given,) = harness.given
    assert given == KernelSource(source, "mine.py") and not kernel.exists()
    assert json.loads(capsys.readouterr().out)["kernel"] == "mine.py"
