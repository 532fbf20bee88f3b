"""The engine of a session: steps, gates, typed events, HITL and Auto loops, resume. No jax."""
