"""The front door of evaluation: where and how kernels are judged and profiled
(`setup.EvaluationSetup`, `setup.ExecutorChoice`) and the service that does it for one task
(`service.EvaluationService`), on this machine's harness or a Ray cluster (`ray_backend`, which
alone imports Ray, and only when it is chosen). The CLI, the workbench and the agents' tools
all come in here; `facts` answers what `doctor` asks of the evaluation. No jax."""
