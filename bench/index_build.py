"""Full index build time and peak memory per corpus, through the real CLI.

    .venv/bin/python -m bench.index_build [musique hotpotqa 2wikimultihopqa]

Each corpus is dropped first so that the build is complete (no reuse), then indexed by
`hoprag index` in a child process whose peak RSS is read from the kernel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.common import BENCHMARKS, DATA, ROOT, save

HOPRAG = str(ROOT / ".venv" / "bin" / "hoprag")


def build(name: str) -> dict[str, float | str]:
    subprocess.run([HOPRAG, "index", "drop", name, "--yes"], capture_output=True)
    corpus = DATA / name / "corpus.json"
    start = time.perf_counter()
    proc = subprocess.Popen(
        [HOPRAG, "index", str(corpus), "--name", name, "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # wait4 gives this child's own resource usage (peak RSS in KiB on Linux).
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"indexing {name} failed: {stderr.strip()}")
    peak_gib = usage.ru_maxrss / 2**20
    show = subprocess.run([HOPRAG, "index", "show", name], capture_output=True, text=True)
    return {
        "corpus": name,
        "seconds": round(seconds, 1),
        "peak_rss_gib": round(peak_gib, 2),
        "summary": stdout.strip(),
        "manifest": show.stdout,
    }


def main() -> None:
    names = sys.argv[1:] or list(BENCHMARKS)
    rows = []
    for name in names:
        row = build(name)
        rows.append(row)
        print(f"{name}: {row['seconds']}s, peak {row['peak_rss_gib']} GiB", flush=True)
    save("index_build", {"command": "python -m bench.index_build " + " ".join(names), "rows": rows})


if __name__ == "__main__":
    main()
