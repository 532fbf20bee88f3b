"""What several test modules share: waiting on conditions, paths to test data. No test module
imports another; they import from here (or from tests.fakes, the fake servers and providers)."""
