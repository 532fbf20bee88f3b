"""The session budget follows the settings: caps, and the user's prices over the built-in ones."""

import pytest

from maxkernel_tui.agents.budget import BudgetExceeded, session_budget
from maxkernel_tui.config import load_settings


def test_settings_caps_and_price_overrides(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(
        'budget_dollars = 0.01\n[prices."gemini-2.5-pro"]\ninput = 100.0\noutput = 100.0\n'
    )
    settings = load_settings(
        env={"MAXKERNEL_TUI_CONFIG": str(config), "MAXKERNEL_TUI_BUDGET_TOKENS": "50000"}
    )
    budget = session_budget(settings)
    assert budget.cap.tokens == 50_000 and budget.cap.usd == 0.01
    assert budget.prices.cost("gemini-2.5-pro", 1_000_000, 0) == pytest.approx(100.0)
    assert budget.prices.cost("gemini-2.5-flash", 1_000_000, 0) == pytest.approx(
        0.30
    )  # built-in price kept
    with pytest.raises(BudgetExceeded):  # 1,000 tokens at $100/M = $0.10 > $0.01
        budget.reserve("gemini-2.5-pro", 500, 500)
