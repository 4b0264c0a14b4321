"""bench.comparisons: which questions it runs, and the row it makes of two runs."""

from __future__ import annotations

import json
from pathlib import Path

from bench.comparisons import compare


def _run(folder: Path, records: list[tuple[str, float, int, float]]) -> Path:
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"system": "deft"}))
    lines = [
        json.dumps({"id": i, "group": "comparison", "em": em, "llm_calls": calls, "seconds": s})
        for i, em, calls, s in records
    ]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_a_row_compares_the_modes_on_the_questions_both_answered(tmp_path: Path) -> None:
    serial = _run(tmp_path / "s", [("a", 1.0, 4, 10.0), ("b", 0.0, 8, 20.0), ("c", 1.0, 4, 8.0)])
    fanout = _run(tmp_path / "f", [("a", 1.0, 3, 6.0), ("b", 1.0, 5, 11.0)])  # c: not yet
    row = compare("2wikimultihopqa", {"fanout": fanout, "serial": serial}, "")
    assert row["shared"] == 2
    assert row["serial"]["median_s"] == 15.0 and row["fanout"]["median_s"] == 8.5
    assert row["serial"]["em"] == 0.5 and row["fanout"]["em"] == 1.0
    assert row["fanout"]["llm_calls"] == 4.0 and row["median_change"] == -0.433
    assert (row["em_serial_only"], row["em_fanout_only"], row["mcnemar_p"]) == (0, 1, 1.0)
    assert row["fanout"]["groups"]["comparison"]["questions"] == 2
