"""What several test modules share, so that no test module imports another: `waiting` (wait on
conditions, never for a fixed time), `paths` (test data), `llm` (the provider test harness:
keys, a sleep that never sleeps, ask and collect) and `cli` (run the command line in a child
process). Fake servers and providers are in tests.fakes."""
