"""Where evaluations run when they do not run in this process's own worker pool: the jobs a
driver sends to a node (`jobs`), the service each node keeps warm (`node_service`), and the Ray
side (`ray_cluster`, `ray_dispatch`), which alone imports Ray, and only when it is chosen.
Nothing here imports the agents; no jax (it runs in the nodes' worker processes)."""
