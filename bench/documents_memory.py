"""Peak memory of `hoprag index` on a 200 MB folder of PDFs (issue 51): documents are
read one at a time, so a folder's bytes must not drive memory, only the text it holds.

    python -m bench.documents_memory [--benchmark 2wikimultihopqa] [--files 100]

Two folders hold the same FILES PDFs of 20 corpus passages each (about 3 pages a file):
`figures`, where every passage is followed by an incompressible figure so that the
folder weighs about 200 MB, as scanned figures and photographs make real PDFs weigh,
and `text`, the same pages without figures. Each is indexed from scratch through the
CLI in a child process whose peak RSS is read from the kernel; the results go to
bench/results/documents_memory.json. Equal peaks mean the bytes are streamed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import numpy as np

from app.settings import Settings
from bench.common import require_data, run_measured, save
from bench.documents import PASSAGES_PER_FILE, write_pdf
from bench.run_systems import HOPRAG

FOLDER_MB = 200
FIGURE_SEED = 51


def write_folders(corpus: list[dict[str, str]], files: int, root: Path) -> dict[str, Path]:
    """The `figures` and `text` folders, written once (a complete folder is kept)."""
    from PIL import Image  # with fpdf2, a dev dependency

    folders = {kind: root / kind for kind in ("figures", "text")}
    if all((f / ".complete").is_file() for f in folders.values()):
        return folders
    # Noise does not compress: each figure adds its raw size to the file.
    figure_bytes = FOLDER_MB * 2**20 / (files * PASSAGES_PER_FILE)
    side = int((figure_bytes / 3) ** 0.5)
    rng = np.random.default_rng(FIGURE_SEED)
    figures = [
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8))
        for _ in range(PASSAGES_PER_FILE)
    ]
    for kind, folder in folders.items():
        folder.mkdir(parents=True, exist_ok=True)
        for n in range(files):
            group = corpus[n * PASSAGES_PER_FILE : (n + 1) * PASSAGES_PER_FILE]
            shown = figures if kind == "figures" else []
            write_pdf(folder / f"part-{n + 1:04d}.pdf", f"part {n + 1}", group, shown)
        (folder / ".complete").write_text("")
    return folders


def measure(folder: Path, name: str) -> dict[str, object]:
    """A complete build of the folder as index `name`: size, passages, time, peak RSS."""
    subprocess.run([HOPRAG, "index", "drop", name, "--yes"], capture_output=True)
    seconds, peak_gib, out = run_measured([HOPRAG, "index", str(folder), "--name", name, "--quiet"])
    subprocess.run([HOPRAG, "index", "drop", name, "--yes"], capture_output=True)
    files = sorted(folder.glob("*.pdf"))
    return {
        "folder": folder.name,
        "files": len(files),
        "megabytes": round(sum(f.stat().st_size for f in files) / 2**20, 1),
        "passages": int(out.split(": ", 1)[1].split()[0]),
        "seconds": round(seconds, 1),
        "peak_rss_gib": round(peak_gib, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="2wikimultihopqa")
    parser.add_argument("--files", type=int, default=100)
    args = parser.parse_args()
    data = require_data([args.benchmark])
    corpus = json.loads((data / args.benchmark / "corpus.json").read_text())
    root = Settings().home / "bench" / "documents_memory" / args.benchmark
    folders = write_folders(corpus, args.files, root)
    rows = []
    for kind, folder in folders.items():
        rows.append(measure(folder, f"memory-{kind}"))
        print(json.dumps(rows[-1]), flush=True)
    command = f"python -m bench.documents_memory --benchmark {args.benchmark} --files {args.files}"
    save("documents_memory", {"command": command, "rows": rows})


if __name__ == "__main__":
    main()
