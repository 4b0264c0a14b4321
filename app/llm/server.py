"""Child-process entry point that owns the embedded `llama-server`.

    python -m app.llm.server PARENT_PID LLAMA_SERVER [arguments]

It starts the server and ends it as soon as hoprag (PARENT_PID) is gone, so that a
killed hoprag never leaves an orphan holding a port and gigabytes of memory. Linux's
PR_SET_PDEATHSIG alone is no substitute in hoprag itself: it fires when the *thread* that
started the child exits, and graph nodes run in short-lived worker threads. Here it is
set from this process's main thread, which lives as long as the server, and a watchdog
thread follows hoprag. Its exit status is the server's; a server killed by a signal
(a crash) is logged as such and passed on as 128 + the signal's number, as shells do.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

WATCH_INTERVAL_S = 1.0
PR_SET_PDEATHSIG = 1


def _die_with_this_process() -> None:
    """In the server, before exec: a SIGKILL when this wrapper dies, however it dies."""
    # Not Linux: no prctl, and the watchdog alone covers hoprag's exit.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _watch(parent: int, server: subprocess.Popen[bytes]) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_INTERVAL_S)
    server.kill()
    os._exit(0)


def main() -> None:
    parent, command = int(sys.argv[1]), sys.argv[2:]
    server = subprocess.Popen(command, preexec_fn=_die_with_this_process)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: server.terminate())
    threading.Thread(target=_watch, args=(parent, server), daemon=True).start()
    code = server.wait()
    if code < 0:
        print(f"llama-server was killed by {signal.Signals(-code).name}", file=sys.stderr)
        sys.exit(128 - code)
    sys.exit(code)


if __name__ == "__main__":
    main()
