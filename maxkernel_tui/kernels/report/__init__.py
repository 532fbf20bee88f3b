"""What an evaluation found, as plain data every layer reads: the checks, their statuses and
verdicts (checks.py), why each check ended as it did, as a code and its figures (reasons.py),
those in words for whoever shows them (words.py), a kernel's figure beside its expert baseline
(expert.py), and whether a time was measured or estimated, and by which clock (basis.py). A
leaf: it imports nothing of the kernels package, so the sandbox, the model and the harness can
all use it. No jax."""
