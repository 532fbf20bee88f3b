"""A model, tools and tool calls per role, from `[roles.*]` in the config file: read, checked,
shown by `config`, and kept by a session that starts with them (its start event)."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxkernel_tui.agents.llm.client import LLMClient
from maxkernel_tui.agents.llm.gemini import GeminiProvider
from maxkernel_tui.agents.porting import PorterImporter, Review
from maxkernel_tui.agents.tools.assignment import RolePlan, role_plan
from maxkernel_tui.agents.tools.specs import DEFAULT_MAX_TOOL_CALLS, DEFAULT_ROLE_TOOLS, ToolName
from maxkernel_tui.config import ConfigError, display_value, load_settings
from maxkernel_tui.kernels.importers import ImportOptions
from maxkernel_tui.kernels.porting.torch_compare import torch_available
from tests.fakes.role_gemini import RoleGemini, ServedInThread
from tests.support.llm import GEMINI_KEY
from tests.support.paths import TESTS
from tests.support.porter_answers import porter_answer, softmax_reference

FILE = """
provider = "gemini"
model = "gemini-2.5-flash"   # the session's: every role without its own

[roles.implementer]
model = "gemini-3.1-pro"
tools = ["jax_api", "lower"]
max_tool_calls = 4

[roles.explainer]
model = "gemini-2.5-flash-lite"

[roles.tester]
tools = []
"""


def settings_from(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_settings(env={"MAXKERNEL_TUI_CONFIG": str(path)})


def test_each_role_gets_its_own_model_and_tools_over_the_defaults(tmp_path: Path) -> None:
    settings = settings_from(tmp_path, FILE)
    assert settings.warnings == ()
    assert settings.role_model("implementer") == "gemini-3.1-pro"
    assert settings.role_model("explainer") == "gemini-2.5-flash-lite"
    assert settings.role_model("planner") == "gemini-2.5-flash"
    plan = role_plan(settings)
    implementer = plan.of("implementer")
    assert (implementer.model, implementer.tools, implementer.max_tool_calls) == (
        "gemini-3.1-pro",
        (ToolName.JAX_API, ToolName.LOWER),
        4,
    )
    assert plan.of("explainer").tools == DEFAULT_ROLE_TOOLS["explainer"]  # model only: tools kept
    assert plan.of("tester").tools == ()  # none, said explicitly
    planner = plan.of("planner")  # no table: the defaults
    assert (planner.model, planner.tools, planner.max_tool_calls) == (
        None,
        DEFAULT_ROLE_TOOLS["planner"],
        DEFAULT_MAX_TOOL_CALLS,
    )
    assert plan.models() == {"implementer": "gemini-3.1-pro", "explainer": "gemini-2.5-flash-lite"}
    shown = display_value("roles", settings.roles)
    assert "implementer: model gemini-3.1-pro, tools jax_api, lower, 4 tool calls" in shown


def test_a_session_keeps_the_plan_it_started_with(tmp_path: Path) -> None:
    plan = role_plan(settings_from(tmp_path, FILE))
    assert RolePlan.from_json(plan.to_json()) == plan
    assert RolePlan.from_json({}) == RolePlan()  # a session stored before roles had plans


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[roles.reviewer]\nmodel = "x"\n', "unknown role 'reviewer'"),
        ("[roles.implementer]\ntemperature = 0.2\n", "expected only"),
        ('[roles.implementer]\ntools = "lower"\n', "expected a list of tool names"),
        ("[roles.implementer]\nmax_tool_calls = -1\n", "0 or more"),
        ('[roles.implementer]\nmodel = ""\n', "expected a model name"),
        ('roles = "implementer"\n', "expected tables of roles"),
    ],
)
def test_a_wrong_roles_table_names_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as wrong:
        settings_from(tmp_path, text)
    assert message in str(wrong.value) and "roles" in str(wrong.value)


def test_an_unknown_tool_is_refused_when_the_session_starts(tmp_path: Path) -> None:
    settings = settings_from(tmp_path, '[roles.debugger]\ntools = ["lower", "run_shell"]\n')
    with pytest.raises(ConfigError) as wrong:
        role_plan(settings)
    assert "[roles.debugger] tools" in str(wrong.value) and "run_shell" in str(wrong.value)


def test_the_porter_asks_its_own_model(tmp_path: Path) -> None:
    settings = settings_from(tmp_path, '[roles.porter]\nmodel = "gemini-2.5-pro"\n')
    engineer: list[Review] = []
    with ServedInThread(RoleGemini({"porter": [porter_answer(softmax_reference(4096, 1024))]})) as (
        server
    ):
        provider = GeminiProvider("gemini-2.5-flash", base_url=server.url, api_key=GEMINI_KEY)
        model = settings.role_model("porter")
        importer = PorterImporter(LLMClient(provider), lambda r: engineer.append(r) or True, model)
        triton = TESTS / "data" / "porting" / "triton_softmax.py"
        if torch_available():
            pytest.skip("with torch the comparison with PyTorch runs first (slow)")
        importer.translate(triton, triton.read_text(), ImportOptions())
    (request,) = server.requests
    assert "/models/gemini-2.5-pro:" in request.path
