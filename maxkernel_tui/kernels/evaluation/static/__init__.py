"""The static rules: a candidate's source parses, defines its entry point, and asks for nothing
that would change what the verdict means (checks.py), including branching on the platform
(platform.py). Fast feedback for agents; no guarantee rests on them. No jax."""
