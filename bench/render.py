"""Render docs/BENCHMARKS.md from the committed results in bench/results/.

    .venv/bin/python -m bench.render > docs/BENCHMARKS.md

Numbers are never typed by hand: every table below comes from a results file written by
a benchmark script, with its date, machine and exact command.
"""

from __future__ import annotations

import json
from typing import Any

from bench.common import RESULTS

INTRO = """# Benchmarks

Every number here comes from a script in `bench/`, run on the machine named with it; this
file is generated from `bench/results/*.json` by `python -m bench.render`. Data:
`../shared/data/` (MuSiQue, 2WikiMultiHopQA, HotpotQA; see its README).
"""


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _header(r: dict[str, Any]) -> str:
    return f"Measured {r['date']} on {r['machine']} with `.venv/bin/{r['command']}`.\n"


def index_build() -> str:
    r = _load("index_build")
    if not r:
        return ""
    lines = [
        "## Indexing",
        "",
        _header(r),
        "Full build (nothing reused) through `hoprag index`; peak RSS of that process.",
        "",
        "| corpus | passages | sentences | entities | wall s | NER s | embed s | peak RSS GiB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in r["rows"]:
        m = json.loads(row["manifest"])
        lines.append(
            f"| {row['corpus']} | {m['passages']} | {m['sentences']} | "
            f"{m['entities']} | {row['seconds']} | {m['seconds'].get('ner', 0)} | "
            f"{m['seconds'].get('embed', 0)} | {row['peak_rss_gib']} |"
        )
    return "\n".join(lines) + "\n"


def retrieval_recall() -> str:
    r = _load("retrieval_recall")
    if not r:
        return ""
    lines = [
        "## Retrieval: recall of all gold passages",
        "",
        _header(r),
        f"Split `{r['split']}`. A question counts at k only if *every* gold passage is "
        "in the top k.",
        "",
        "| benchmark | group | n | dense@5 | dense@10 | dense@20 | bm25@5 | bm25@10 | "
        "bm25@20 | fused@5 | fused@10 | fused@20 |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for bench, groups in r["results"].items():
        for group, row in groups.items():
            cells = " | ".join(
                f"{row[m][str(k)]:.3f}" for m in ("dense", "bm25", "fused") for k in (5, 10, 20)
            )
            lines.append(f"| {bench} | {group} | {row['n']} | {cells} |")
    return "\n".join(lines) + "\n"


def gateway_speed() -> str:
    parts = []
    for path in sorted(RESULTS.glob("gateway_speed_*.json")):
        r = json.loads(path.read_text())
        lines = [
            _header(r),
            "| model | --logits_all | prompt tokens | prompt tok/s | generated tok/s |",
            "| --- | --- | ---: | ---: | ---: |",
        ]
        for row in r["rows"]:
            lines.append(
                f"| {row['model']} | {row['logits_all']} | {row['prompt_tokens']} | "
                f"{row['prompt_tok_per_s']} | {row['gen_tok_per_s']} |"
            )
        parts.append("\n".join(lines))
    if not parts:
        return ""
    return "## LLM gateway speed\n\n" + "\n\n".join(parts) + "\n"


def main() -> None:
    sections = [INTRO, index_build(), retrieval_recall(), gateway_speed()]
    print("\n".join(s for s in sections if s).rstrip())


if __name__ == "__main__":
    main()
