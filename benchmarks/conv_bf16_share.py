"""How much of its tolerance a convolution task's reference uses with bf16 operands (f32 sums),
measured at production's contraction depth and image size on a few of its images, beside the
same measurement at check shapes: what the built-in agent's projection (agents/builtin/
precision.py) estimates from check shapes alone. Default: 22k, 2 of its 128 images.

    JAX_PLATFORMS=cpu python benchmarks/conv_bf16_share.py [--task 22k] [--images 2] [--batch batch]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from maxkernel_tui.agents.builtin.precision import bf16_share
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.config_names import BENCH, CHECK
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks
from maxkernel_tui.kernels.rounding_depth import PROJECTED_SHARE_LIMIT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="22k", help="a built-in task id or number")
    parser.add_argument("--images", type=int, default=2, help="images of production's batch")
    parser.add_argument("--batch", default="batch", help="the batch's name in the task's CONFIGS")
    args = parser.parse_args()
    tasks, _ = load_tasks(builtin_suite_dir())
    task = find_task(args.task, tasks)
    configs = runtime.load_reference(task).CONFIGS
    production = configs[BENCH]
    if args.batch not in production:
        parser.error(f"{task.task_id}'s sizes are {sorted(production)}: which is the batch?")
    sliced = {**production, args.batch: args.images}
    print(f"{task.task_id}: bf16 operands with f32 sums, worst element over seeds 0 and 1")
    for label, sizes in (("check shapes", configs[CHECK]), ("production, sliced", sliced)):
        started = time.perf_counter()
        share = bf16_share(task, BENCH, dict(sizes), matmuls=1)
        seconds = time.perf_counter() - started
        print(f"  {label:20} {sizes}: {share:.1%} of the tolerance ({seconds:.1f} s)")
    print(
        f"  the agent keeps bf16 where projected production stays under {PROJECTED_SHARE_LIMIT:.0%}"
    )


if __name__ == "__main__":
    main()
