"""Sentence-graph build time, peak memory and edge counts per corpus, through the CLI.

    .venv/bin/python -m bench.graph_build [musique hotpotqa 2wikimultihopqa]

The graph files of each index are removed first, so every sentence is embedded again and
the build is complete; `hoprag graph build` runs in a child process whose peak RSS is read
from the kernel. (`hoprag index` builds the same graph as part of an index build.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from app.graph_build import GRAPH_FILE, VECTORS_FILE
from app.settings import Settings
from bench.common import BENCHMARKS, ROOT, save

HOPRAG = str(ROOT / ".venv" / "bin" / "hoprag")


def build(name: str) -> dict:
    folder = Settings().indexes_dir / name
    for stale in (GRAPH_FILE, VECTORS_FILE):
        (folder / stale).unlink(missing_ok=True)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [HOPRAG, "graph", "build", "--index", name, "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"graph build of {name} failed: {stderr.strip()}")
    report = json.loads(stdout)
    return {
        "corpus": name,
        "seconds": round(seconds, 1),
        "peak_rss_gib": round(usage.ru_maxrss / 2**20, 2),
        "files_mib": round(
            sum((folder / f).stat().st_size for f in (GRAPH_FILE, VECTORS_FILE)) / 2**20, 1
        ),
        **{k: v for k, v in report.items() if k != "seconds"},
        "seconds_build": report["seconds"],
    }


def main() -> None:
    names = sys.argv[1:] or list(BENCHMARKS)
    rows = []
    for name in names:
        row = build(name)
        rows.append(row)
        print(
            f"{name}: {row['seconds']}s, peak {row['peak_rss_gib']} GiB, {row['edges']}", flush=True
        )
        # Saved after each corpus, so a stopped run keeps what it measured.
        command = "python -m bench.graph_build " + " ".join(names)
        save("graph_build", {"command": command, "rows": rows})


if __name__ == "__main__":
    main()
