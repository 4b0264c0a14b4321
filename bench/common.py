"""Shared bits of the benchmark scripts: where the data is, machine facts, result files."""

from __future__ import annotations

import json
import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("HOPRAG_DATA", ROOT.parent / "shared" / "data"))
RESULTS = ROOT / "bench" / "results"
BENCHMARKS = ("musique", "2wikimultihopqa", "hotpotqa")


def machine() -> str:
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.machine()}, {os.cpu_count()} cores, {mem_gib:.0f} GiB, no GPU"


def save(name: str, payload: dict[str, Any]) -> Path:
    """Write one benchmark's results with date and machine, for docs/BENCHMARKS.md."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    payload = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        **payload,
    }
    out.write_text(json.dumps(payload, indent=2))
    return out


def questions(benchmark: str, split: str = "dev") -> list[dict[str, Any]]:
    items = json.loads((DATA / benchmark / "questions.json").read_text())
    return [q for q in items if q.get("split") == split]
