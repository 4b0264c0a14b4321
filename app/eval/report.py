"""Comparing runs and reporting them: paired differences with McNemar's exact test, and a
self-contained HTML report with the plots people would rather look at than read."""

from __future__ import annotations

import base64
import html
import io
import statistics
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt

from app.errors import UserError
from app.eval.metrics import mcnemar_exact
from app.eval.run import PER_QUESTION_METRICS, SUMMARY_COLUMNS, load_run, summarise

COMPARED = (*PER_QUESTION_METRICS, "seconds")
PAIRED_TESTS = ("em", "judged")


def _label(config: dict[str, Any]) -> str:
    return f"{config['system']} @ {config['index']}"


def compare_runs(run_a: Path, run_b: Path) -> dict[str, Any]:
    """Means of each metric over the questions both runs answered, and their difference."""
    (config_a, records_a), (config_b, records_b) = load_run(run_a), load_run(run_b)
    by_a, by_b = {r["id"]: r for r in records_a}, {r["id"]: r for r in records_b}
    shared = [i for i in by_a if i in by_b]
    if not shared:
        raise UserError(f"{run_a} and {run_b} share no answered question")
    rows = []
    for metric in COMPARED:
        pairs = [
            (by_a[i][metric], by_b[i][metric])
            for i in shared
            if by_a[i].get(metric) is not None and by_b[i].get(metric) is not None
        ]
        if not pairs:
            continue
        mean_a = statistics.fmean(a for a, _ in pairs)
        mean_b = statistics.fmean(b for _, b in pairs)
        p_value = ""
        if metric in PAIRED_TESTS:
            a_only = sum(1 for a, b in pairs if a >= 0.5 > b)
            b_only = sum(1 for a, b in pairs if b >= 0.5 > a)
            p_value = f"{mcnemar_exact(a_only, b_only):.4f}"
        rows.append(
            {
                "metric": metric,
                "a": round(mean_a, 4),
                "b": round(mean_b, 4),
                "b_minus_a": round(mean_b - mean_a, 4),
                "mcnemar_p": p_value,
            }
        )
    return {
        "a": _label(config_a),
        "b": _label(config_b),
        "shared": len(shared),
        "rows": rows,
        "same_prompts": _prompts(config_a) == _prompts(config_b),
    }


def _prompts(config: dict[str, Any]) -> set[str] | None:
    """The prompt fingerprints a run's answers came from (None for a run from before they
    were recorded)."""
    code = config.get("code")
    return {v["prompts"] for v in code} if code else None


def _png(fig: Any, out: Path, name: str) -> tuple[Path, str]:
    """Save a figure as OUT/NAME.png and return it also as a data URI for the HTML."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    path = out / f"{name}.png"
    path.write_bytes(buffer.getvalue())
    return path, "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _accuracy_plot(runs: list[tuple[str, list[dict[str, Any]]]], out: Path) -> tuple[Path, str]:
    groups = sorted({r["group"] or "all" for _, records in runs for r in records})
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(groups) * max(1, len(runs)) / 2), 4))
    width = 0.8 / max(1, len(runs))
    for n, (label, records) in enumerate(runs):
        summary = summarise(records)["groups"]
        metric = "judged" if any(r.get("judged") is not None for r in records) else "em"
        values = [(summary.get(g) or {}).get(metric) or 0.0 for g in groups]
        ax.bar(
            [i + n * width for i in range(len(groups))],
            values,
            width,
            label=f"{label} ({'judged' if metric == 'judged' else 'EM'})",
        )
    ax.set_xticks(
        [i + width * (len(runs) - 1) / 2 for i in range(len(groups))], groups, rotation=20
    )
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.set_title("Accuracy by hops / question type")
    ax.legend(fontsize=8)
    return _png(fig, out, "accuracy_by_group")


def _cost_plot(runs: list[tuple[str, list[dict[str, Any]]]], out: Path) -> tuple[Path, str]:
    metrics = [
        ("llm_calls", "LLM calls"),
        ("input_tokens", "input tokens"),
        ("output_tokens", "output tokens"),
        ("seconds", "seconds"),
    ]
    fig, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 4))
    labels = [label for label, _ in runs]
    for ax, (key, title) in zip(axes, metrics, strict=True):
        ax.boxplot([[r[key] for r in records] or [0] for _, records in runs])
        ax.set_xticks(range(1, len(labels) + 1), labels, rotation=30, ha="right", fontsize=7)
        ax.set_title(f"{title} per question")
    return _png(fig, out, "cost_per_question")


def _coverage_plot(runs: list[tuple[str, list[dict[str, Any]]]], out: Path) -> tuple[Path, str]:
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, records in runs:
        s = summarise(records)["all"]
        if s["coverage"] is None:
            continue
        ax.scatter([s["words_fed"]], [s["coverage"]], s=60)
        ax.annotate(
            label,
            (s["words_fed"], s["coverage"]),
            fontsize=8,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_xlabel("words of passages fed per question (mean)")
    ax.set_ylabel("evidence-chain coverage")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Coverage versus reading cost")
    return _png(fig, out, "coverage_vs_words")


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else html.escape(str(value))


def write_report(folders: list[Path], out: Path) -> Path:
    """OUT/report.html (images embedded, so the file stands alone) plus OUT/*.png."""
    matplotlib.use("Agg")
    if not folders:
        raise UserError("name at least one run folder")
    runs = []
    for folder in folders:
        config, records = load_run(folder)
        if not records:
            raise UserError(f"{folder} has no answered question yet")
        runs.append((_label(config), records))
    out.mkdir(parents=True, exist_ok=True)
    plots = [_accuracy_plot(runs, out), _cost_plot(runs, out), _coverage_plot(runs, out)]
    columns = SUMMARY_COLUMNS
    rows = "".join(
        f"<tr><td>{html.escape(label)}</td>"
        + "".join(f"<td>{_fmt(summarise(records)['all'][c])}</td>" for c in columns)
        + "</tr>"
        for label, records in runs
    )
    images = "".join(
        f'<figure><img src="{uri}" alt="{path.stem}"><figcaption>{path.name}</figcaption></figure>'
        for path, uri in plots
    )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hoprag evaluation report</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}
td:first-child{{text-align:left}}img{{max-width:100%}}</style></head>
<body><h1>hoprag evaluation report</h1>
<table><tr><th>run</th>{"".join(f"<th>{c}</th>" for c in columns)}</tr>{rows}</table>
{images}</body></html>
"""
    report = out / "report.html"
    report.write_text(page, encoding="utf-8")
    return report
