"""Sentence-graph load time per corpus, as every run loads it, through the CLI.

    .venv/bin/python -m bench.graph_load [musique hotpotqa 2wikimultihopqa]

`hoprag graph stats` opens the stored graph in a child process: `load_seconds` is the
load itself, `seconds` the whole process (Python start-up and imports included).
"""

from __future__ import annotations

import json

from bench.common import run_measured, run_per_corpus
from bench.graph_build import HOPRAG


def load(name: str) -> dict:
    seconds, peak_gib, stdout = run_measured([HOPRAG, "graph", "stats", "--index", name])
    report = json.loads(stdout)
    return {
        "corpus": name,
        "seconds": round(seconds, 2),
        "peak_rss_gib": round(peak_gib, 2),
        "sentences": report["sentences"],
        "load_seconds": report["load_seconds"],
    }


def main() -> None:
    run_per_corpus("graph_load", load)


if __name__ == "__main__":
    main()
