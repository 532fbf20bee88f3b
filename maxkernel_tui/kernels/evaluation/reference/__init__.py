"""The reference's side, apart from any candidate: the process that computes reference outputs
(worker.py), one per task (processes.py), over a few boxes of production shape
(slices.py), its production-tile files in the cache (cache.py, tiles.py)."""
