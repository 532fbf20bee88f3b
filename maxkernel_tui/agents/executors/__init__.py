"""Executors behind the engine's `Tools` protocol: where evaluations and profiles run. `local`
(this machine's worker pool, `KernelTools`) is the default; `ray` spreads them over a Ray
cluster (`ray_tools`, which alone imports Ray, and only when it is chosen). No jax, no Textual."""
