"""The judge: the sandboxed candidate worker that runs a carried program's checks (Pallas use,
TPU lowering and compile, numerics, production work and tiles; worker.py), and saves outputs
as .npy files NumPy alone can read (outputs.py)."""
