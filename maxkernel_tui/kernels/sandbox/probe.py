"""The worker `doctor` starts to learn which sandbox layers this machine gives: it runs
confined by a policy like a candidate's (worker_main enters the sandbox first) and prints the
layers in force and those missing, with why. No jax here.

    python -m maxkernel_tui.kernels.worker_main maxkernel_tui.kernels.sandbox.probe
"""

from __future__ import annotations

import json

from maxkernel_tui.kernels.sandbox.confine import confinement


def main() -> None:
    state = confinement()
    print(
        json.dumps(
            {
                "active": [str(layer) for layer in state.active],
                "missing": {str(layer): why for layer, why in state.missing.items()},
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
