"""The SQLite session store: sessions, the append-only event log, kernel versions with their
parents, evaluation and profile reports, LLM calls and search nodes. One file in WAL mode; an
event is committed before anything shows it, and a process killed at any moment leaves the file
consistent, with no event lost or doubled.

Stdlib only (no jax, no Textual): the UI, the agents and the CLI all use it. API keys are never
stored: every payload, report and message is redacted on its way in (`store.redact`).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Not on first use: the function `redact` has the name of its module, which would replace it
# here once the module loads.
from maxkernel_tui.store.redact import REDACTED, is_secret_name, redact, redact_text

if TYPE_CHECKING:
    from maxkernel_tui.store.db import Store, default_store_path, open_store, schema_of
    from maxkernel_tui.store.kinds import (
        ACTIVE,
        AUTO,
        DONE,
        FAILED,
        GRAPH,
        HITL,
        MODES,
        STOPPED,
        BestRule,
        StoreError,
    )
    from maxkernel_tui.store.rows import (
        BestKernel,
        Evaluation,
        Event,
        KernelVersion,
        LlmCall,
        Profile,
        SearchNode,
        Session,
        SessionSummary,
    )
    from maxkernel_tui.store.schema import MIGRATIONS, SCHEMA_VERSION

# Each name loads its module on first use: the workbench's first frame names a mode and the
# store's error, and never makes a row or opens the database (sqlite3).
_MODULE_OF = {
    **dict.fromkeys(("Store", "default_store_path", "open_store", "schema_of"), "db"),
    **dict.fromkeys(
        (
            "ACTIVE",
            "AUTO",
            "DONE",
            "FAILED",
            "GRAPH",
            "HITL",
            "MODES",
            "STOPPED",
            "BestRule",
            "StoreError",
        ),
        "kinds",
    ),
    **dict.fromkeys(
        (
            "BestKernel",
            "Evaluation",
            "Event",
            "KernelVersion",
            "LlmCall",
            "Profile",
            "SearchNode",
            "Session",
            "SessionSummary",
        ),
        "rows",
    ),
    **dict.fromkeys(("MIGRATIONS", "SCHEMA_VERSION"), "schema"),
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)


__all__ = [
    "ACTIVE",
    "AUTO",
    "DONE",
    "FAILED",
    "GRAPH",
    "HITL",
    "MIGRATIONS",
    "MODES",
    "REDACTED",
    "SCHEMA_VERSION",
    "STOPPED",
    "BestKernel",
    "BestRule",
    "Evaluation",
    "Event",
    "KernelVersion",
    "LlmCall",
    "Profile",
    "SearchNode",
    "Session",
    "SessionSummary",
    "Store",
    "StoreError",
    "default_store_path",
    "is_secret_name",
    "open_store",
    "redact",
    "redact_text",
    "schema_of",
]
