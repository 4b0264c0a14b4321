"""Sentence-graph build time, peak memory and edge counts per corpus, through the CLI.

    .venv/bin/python -m bench.graph_build [musique hotpotqa 2wikimultihopqa]

The graph files of each index are removed first, so every sentence is embedded again and
the build is complete; `hoprag graph build` runs in a child process whose peak RSS is read
from the kernel. (`hoprag index` builds the same graph as part of an index build.)
"""

from __future__ import annotations

import json

from app.index.graph_build import GRAPH_FILE, VECTORS_FILE
from app.settings import Settings
from bench.common import ROOT, run_measured, run_per_corpus

HOPRAG = str(ROOT / ".venv" / "bin" / "hoprag")


def build(name: str) -> dict:
    folder = Settings().indexes_dir / name
    for stale in (GRAPH_FILE, VECTORS_FILE):
        (folder / stale).unlink(missing_ok=True)
    seconds, peak_gib, stdout = run_measured([HOPRAG, "graph", "build", "--index", name, "--quiet"])
    report = json.loads(stdout)
    return {
        "corpus": name,
        "seconds": round(seconds, 1),
        "peak_rss_gib": round(peak_gib, 2),
        "files_mib": round(
            sum((folder / f).stat().st_size for f in (GRAPH_FILE, VECTORS_FILE)) / 2**20, 1
        ),
        **{k: v for k, v in report.items() if k != "seconds"},
        "seconds_build": report["seconds"],
    }


def main() -> None:
    run_per_corpus("graph_build", build)


if __name__ == "__main__":
    main()
