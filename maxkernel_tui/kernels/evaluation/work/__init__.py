"""Where the work happens: heavy work inside Pallas or in XLA around it (jaxpr_work.py), what each
`pallas_call` does over its grid (kernel_work.py), and the verdicts earned from that at
production shapes (production_checks.py)."""
