"""A worker for the sandbox tests, run confined as `python -m maxkernel_tui.kernels.worker_main
tests.support.nested_sandbox`: it tries to enter the sandbox again (where its layers are
refused: seccomp denies unshare), and prints what happened, so a test sees a machine that lacks
layers without changing this one's."""

import json
import os

from maxkernel_tui.kernels.sandbox.confine import SandboxUnavailable, confine
from maxkernel_tui.kernels.sandbox.policy import SandboxPolicy


def main() -> None:
    try:
        state = confine(SandboxPolicy(writable=(os.getcwd(),)), parent_alive=lambda: True)
    except SandboxUnavailable as error:
        print(json.dumps({"refused": str(error)}), flush=True)
        return
    missing = {str(layer): why for layer, why in state.missing.items()}
    print(json.dumps({"ran": True, "missing": missing}), flush=True)


if __name__ == "__main__":
    main()
