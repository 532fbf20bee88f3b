"""The production tiles check: how many output blocks to sample (plan.py), whether a sampled run
fits in memory (memory.py), running the sampled blocks at production shapes in interpret mode
(sampled_run.py), and comparing them with the reference (verdict.py)."""
