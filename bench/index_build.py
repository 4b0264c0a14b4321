"""Full index build time and peak memory per corpus, through the real CLI.

    .venv/bin/python -m bench.index_build [musique hotpotqa 2wikimultihopqa]

Each corpus is dropped first so that the build is complete (no reuse), then indexed by
`hoprag index` in a child process whose peak RSS is read from the kernel.
"""

from __future__ import annotations

import subprocess

from bench.common import ROOT, require_data, run_measured, run_per_corpus

HOPRAG = str(ROOT / ".venv" / "bin" / "hoprag")


def build(name: str) -> dict[str, float | str]:
    subprocess.run([HOPRAG, "index", "drop", name, "--yes"], capture_output=True)
    corpus = require_data([name]) / name / "corpus.json"
    seconds, peak_gib, stdout = run_measured(
        [HOPRAG, "index", str(corpus), "--name", name, "--quiet"]
    )
    show = subprocess.run([HOPRAG, "index", "show", name], capture_output=True, text=True)
    return {
        "corpus": name,
        "seconds": round(seconds, 1),
        "peak_rss_gib": round(peak_gib, 2),
        "summary": stdout.strip(),
        "manifest": show.stdout,
    }


def main() -> None:
    run_per_corpus("index_build", build)


if __name__ == "__main__":
    main()
