"""Derived configurations: `check` and `heldout` for tasks that declare only production shapes
(MaxKernel's plain adapted format, JAXBench's native folders). No jax.

sites.py finds the sizes and fixed keys of a task's input code, rules.py derives the sizes,
plan.py decides a task's configurations (or why it keeps production only), rewrite.py and
install.py make a loaded reference answer `get_inputs(config, seed)` in a worker, render.py
writes a plain reference in our format (`tasks import`). Which equal sizes the reference really
ties is found by tracing it, in a worker (kernels/tie_probe.py, with jax), and kept by the digest
of the task's files (kernels/traced_ties.py) for every process that plans the task.
"""
