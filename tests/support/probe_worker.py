"""A worker for the fork server's tests, run as `python -m maxkernel_tui.kernels.worker_main
tests.support.probe_worker`: says where and how it runs, or ends as asked."""

import ctypes
import json
import os
import resource
import signal
import sys
import tempfile


def main() -> None:
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "exit" in request:
            sys.exit(request["exit"])
        if "hold_gil" in request:  # native code that keeps the GIL: no Python thread runs
            print(json.dumps({"holding": True}), flush=True)
            ctypes.PyDLL(None).sleep(request["hold_gil"])
        if request.get("kill"):
            os.kill(os.getpid(), signal.SIGKILL)
        print(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "parent": os.getppid(),
                    "session_leader": os.getsid(0) == os.getpid(),
                    "cwd": os.getcwd(),
                    "tmp": tempfile.gettempdir(),
                    "env": dict(os.environ),
                    "memory_limit": resource.getrlimit(resource.RLIMIT_AS)[0],
                    "jax_already_imported": "jax" in sys.modules,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
