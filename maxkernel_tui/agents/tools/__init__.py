"""Tools the sub-agents may call through the providers' function calling (DESIGN §6c).

- `specs`: the tools' names and declarations (`ToolSpec`), which role gets which by default,
  and the checking of a call's arguments
- `assignment`: each role's model, tools and tool calls per step, from the settings
- `jax_api`: the signature, docstring and source of a jax symbol, looked up in a worker process
  (`jax_api_worker`, which imports jax) so that answers match the installed jax
- `runner`: carries out one call: `knowledge`, `jax_api`, `lower` and `check` (through the
  harness's sandboxed workers), `profile_summary`

No jax in this process; no credentials reach a tool (its workers get a scrubbed environment).
"""
