"""Training kernels the built-in agent writes: each family's forward kernel (saving what its
backward needs), its backward kernels, and a `jax.custom_vjp` wrapper joining them, as real
Python that jax runs and tests call (like the forward pieces one level up).

rmsnorm.py (dx and dscale in one pass over the rows), gemm_gelu.py (the GELU's derivative fused
into both gradient matmuls), cross_entropy.py (softmax minus one-hot from the saved
log-sum-exp), flash.py (flash attention's dq kernel and dk/dv kernel from the saved
log-sum-exp, causal blocks skipped). Render (agents/builtin/training_render.py) copies their
functions into a kernel file whole; nothing is substituted into them.
"""
