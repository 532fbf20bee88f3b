"""The tracer and what it carries: the one sandboxed process that imports a candidate traces its
programs (candidate.py) and writes them as bytes (transport.py, program_pickle.py); the
harness's side believes nothing else from it (tracing.py); the judge loads a carried program
and checks it is the task's (carried.py)."""
