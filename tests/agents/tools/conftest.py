"""Fixtures of the agent-tool tests: real sessions on 12p (`open_on`, tests/support/sessions.py)."""

from __future__ import annotations

from tests.support.sessions import open_on, rmsnorm, settings, store

__all__ = ["open_on", "rmsnorm", "settings", "store"]
