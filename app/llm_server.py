"""Child-process entry point of the embedded llama.cpp server.

    python -m app.llm_server PARENT_PID [llama_cpp.server arguments]

A watchdog thread ends the server as soon as its parent process is gone, so that a
killed hoprag never leaves an orphan holding a port and 3 GB of memory. (Linux's
PR_SET_PDEATHSIG is no substitute: it fires when the *thread* that started the child
exits, and graph nodes run in short-lived worker threads.)
"""

from __future__ import annotations

import os
import sys
import threading
import time

WATCH_INTERVAL_S = 1.0


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_INTERVAL_S)
    os._exit(0)


def main() -> None:
    parent = int(sys.argv[1])
    sys.argv = ["llama_cpp.server", *sys.argv[2:]]
    threading.Thread(target=_watch, args=(parent,), daemon=True).start()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
