"""Step keys: a resumed session finds its stored results under the keys an earlier release
wrote, so the helpers must build exactly those strings, and parse them back."""

from __future__ import annotations

from maxkernel_tui.agents.orchestration import keys


def test_step_keys_are_those_stored_sessions_have() -> None:
    assert keys.iteration_step(2, "plan") == "i2/plan"
    assert keys.debug(keys.iteration(2), 1) == "i2/debug1"
    assert keys.retry("i1/plan", 1) == "i1/plan.1" and keys.retry("i1/plan", 0) == "i1/plan"
    assert keys.node_step("n3", "implement") == "n3/implement"
    assert keys.debug("n3", 2) == "n3/debug2"
    assert keys.sub(keys.sub("i1/tune", "apply0"), "profile") == "i1/tune/apply0/profile"
    assert keys.explain(3) == "explain/3" and keys.end(2) == "end/2"
    assert keys.node_change("n7", "created") == "n7/node/created"
    assert keys.file_name("i1/tester") == "i1-tester.py"
    assert [keys.iteration_of(k) for k in ("i2/debug1", "i12/plan.1", "n3/implement")] == [2, 12, 0]
    assert keys.iteration_of("explain/3") == 0
