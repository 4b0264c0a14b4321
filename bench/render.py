"""Render docs/BENCHMARKS.md from the committed results in bench/results/.

    .venv/bin/python -m bench.render > docs/BENCHMARKS.md

Numbers are never typed by hand: every table below comes from a results file written by
a benchmark script, with its date, machine and exact command.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from itertools import takewhile
from statistics import mean
from typing import Any

from app.eval.run import SUMMARY_COLUMNS, load_run, summarise
from bench.common import BENCHMARKS, RESULTS, ROOT, load_results, machine

INTRO = """# Benchmarks

Every number here comes from a script in `bench/`, run on the machine named with it; this
file is generated from `bench/results/*.json` by `python -m bench.render`. Data:
`../shared/data/` (MuSiQue, 2WikiMultiHopQA, HotpotQA; see its README).
"""

DM_EVAL_REPORT = ROOT / "docs" / "dm_eval" / "dm_eval.json"  # written by `hoprag dm eval`


def _header(r: dict[str, Any]) -> str:
    """Where and how a result was measured: the command as run from the repository root,
    environment settings first, then the venv's program."""
    words = r["command"].split()
    env = list(takewhile(lambda w: re.fullmatch(r"[A-Z_]+=\S*", w), words))
    command = " ".join([*env, ".venv/bin/" + " ".join(words[len(env) :])])
    return f"Measured {r['date']} on {r['machine']} with `{command}`.\n"


def index_build() -> str:
    r = load_results("index_build")
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
    musique = next((row for row in r["rows"] if row["corpus"] == "musique"), None)
    if musique:
        verdict = "met" if musique["seconds"] < 300 else "NOT met"
        lines += [
            "",
            f"Target: the MuSiQue corpus fully indexed in under 5 minutes on this "
            f"machine: {verdict} ({musique['seconds']} s). Embedding with MiniLM on "
            "torch dominates; a re-index of an unchanged corpus does nothing, and "
            "added documents are the only ones analysed and embedded.",
        ]
    return "\n".join(lines) + "\n"


def retrieval_recall() -> str:
    r = load_results("retrieval_recall")
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


def serving() -> str:
    """Embedded server options replayed on recorded DeFT traffic (bench.serving)."""
    r = load_results("serving")
    if not r:
        return ""
    lines = [
        "## Embedded server options",
        "",
        _header(r),
        f"The {r['calls']} chat calls that `deft` made on {r['questions']} dev questions, "
        "replayed against a fresh `llama-server` per option: one question after another "
        "(one chat), and for slot counts all questions at once as well (concurrent chats). "
        "`reused`: the share of "
        "prompt tokens served from the slots' cache; `changed`: replies that differ from "
        "the first row's that replayed them the same way (greedy decoding).",
        "",
        "| option | one chat s | reused | changed | concurrent s | reused | changed |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in r["rows"]:
        cells = [row["config"]]
        for mode in ("sequential", "concurrent"):
            m = row.get(mode)
            cells += (
                [m["seconds"], _cell(m["prompt_reuse"]), m["replies_changed"]] if m else 3 * ["-"]
            )
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    if r.get("notes"):
        lines += ["", r["notes"]]
    return "\n".join(lines) + "\n"


# The last deft run of each benchmark on llama-cpp-python's server, archived (under this
# name) when deft is rerun on llama-server with the same graph code.
DEFT_BEFORE_SERVER = {
    "musique": "musique-deft-0c983a4",
    "2wikimultihopqa": "2wikimultihopqa-deft-30cb0fd",
    "hotpotqa": "hotpotqa-deft-081559a",
}


def deft_speed() -> str:
    """deft's seconds per question on llama-server against its last run on the old server."""
    from app.eval.report import compare_runs

    rows = []
    for bench, archived in DEFT_BEFORE_SERVER.items():
        before, after = RESULTS / "archive" / archived, RESULTS / "eval" / f"{bench}-deft"
        if not (before / "results.jsonl").is_file() or not (after / "results.jsonl").is_file():
            continue  # not rerun on llama-server yet
        result = compare_runs(before, after)
        metric = {r["metric"]: r for r in result["rows"]}
        old, new = summarise(load_run(before)[1])["all"], summarise(load_run(after)[1])["all"]
        rows.append(
            f"| {bench} | {result['shared']} | {old['seconds_median']:.1f} | "
            f"{new['seconds_median']:.1f} | {new['seconds_median'] / old['seconds_median']:.2f} | "
            f"{metric['em']['a']} / {metric['em']['b']} | {metric['em']['mcnemar_p']} | "
            f"{old['llm_calls']:.2f} / {new['llm_calls']:.2f} | {_cell(new['prompt_reuse'])} |"
        )
    if not rows:
        return ""
    return (
        "\n".join(
            [
                "## Answering speed: deft on llama-server",
                "",
                "The `deft` runs of the tables above (shipped defaults, first 60 dev questions, "
                "`.venv/bin/python -m bench.run_systems --systems deft`) against the last runs of "
                "the same graph on llama-cpp-python's server (`bench/results/archive/`, named in "
                "`bench/render.py`; their notes say that parts of them shared the machine, so "
                "their seconds are upper bounds). `hoprag eval compare ARCHIVED NEW` gives the "
                "EM test. `reused`: the share of prompt tokens the server's slots did not read "
                "again.",
                "",
                "| benchmark | shared | median s before | median s now | ratio | EM before / now "
                "| p (EM) | LLM calls before / now | reused |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
                *rows,
            ]
        )
        + "\n"
    )


def _cell(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def evaluations() -> str:
    """One table per benchmark from the run folders in bench/results/eval/."""

    from bench.cache_study import RUNS as CACHE_RUNS

    folders = sorted(
        p
        for p in (RESULTS / "eval").glob("*")
        if (p / "run.json").is_file() and p.name not in CACHE_RUNS.values()
    )
    by_bench: dict[str, list[dict[str, Any]]] = {}
    for folder in folders:
        config, records = load_run(folder)
        if records:
            label = folder.name.removeprefix(f"{config['index']}-")
            note = folder / "note.md"  # what a reader must know about this run
            by_bench.setdefault(config["index"], []).append(
                {
                    "config": config,
                    "label": label,
                    "note": note.read_text().strip() if note.is_file() else "",
                    **summarise(records),
                }
            )
    if not by_bench:
        return ""
    lines = [
        "## End-to-end answering",
        "",
        "Each row is one `hoprag eval` run folder in `bench/results/eval/` (made by "
        "`.venv/bin/python -m bench.run_systems`); `n` below the requested limit means the "
        "run is still partial. Judge: the same 1.5B model as the reader (no second model "
        "is configured), so `judged` is noisy; `contain` needs no model. Seconds are wall "
        "time on the 2-core machine, which at times also ran other jobs (tests, calibration), "
        "so they are upper bounds; runs made after 16:00 UTC on 2026-11-29 ran two at a time "
        "with one llama.cpp thread each (`HOPRAG_LLM_THREADS=1`), so their seconds are "
        "roughly twice a solo run's. A fresh `deft` run starts with a cold QA cache. "
        "`dm_calls` counts the DM judgements a run's trace records (DeFT: relevance of each "
        "retrieved or reached passage, depth, direct, sufficiency, same-question; ChainRAG: "
        "relevance of each gathered sentence; neither counts the reranking of seed "
        "sentences).",
        "",
    ]
    for bench, summaries in by_bench.items():
        lines += [
            f"### {bench}",
            "",
            "| system | " + " | ".join(SUMMARY_COLUMNS) + " |",
            "| --- |" + " ---: |" * len(SUMMARY_COLUMNS),
        ]
        for s in summaries:
            lines.append(
                f"| {s['label']} | "
                + " | ".join(_cell(s["all"][c]) for c in SUMMARY_COLUMNS)
                + " |"
            )
        groups = sorted({g for s in summaries for g in s["groups"]})
        if len(groups) > 1:
            lines += [
                "",
                "Judged accuracy / EM / evidence-chain coverage by group (hops on MuSiQue):",
                "",
                "| system | " + " | ".join(groups) + " |",
                "| --- |" + " ---: |" * len(groups),
            ]
            for s in summaries:
                cells = []
                for g in groups:
                    block = s["groups"].get(g)
                    cells.append(
                        f"{_cell(block['judged'])} / {_cell(block['em'])} / "
                        f"{_cell(block['coverage'])} (n={block['n']})"
                        if block
                        else "-"
                    )
                lines.append(f"| {s['label']} | " + " | ".join(cells) + " |")
        notes = [f"- `{s['label']}`: {s['note']}" for s in summaries if s["note"]]
        if notes:
            lines += ["", *notes]
        lines += _paired_tests(bench, {s["label"] for s in summaries})
        lines.append("")
    return "\n".join(lines)


def _twin_variants() -> list[tuple[str, str]]:
    """(a, b), a listed first, where variant b runs a's system with one setting added or
    changed: b's clean pair."""
    from bench.run_systems import VARIANTS

    return [
        (a, b)
        for i, (a, (system_a, env_a)) in enumerate(VARIANTS.items())
        for b, (system_b, env_b) in list(VARIANTS.items())[i + 1 :]
        if system_a == system_b
        and env_a.keys() <= env_b.keys()
        and sum(env_a.get(k) != v for k, v in env_b.items()) == 1
    ]


def _paired_tests(bench: str, systems: set[str]) -> list[str]:
    """McNemar's exact test of deft against the baselines, on the questions both answered."""
    from app.eval.report import compare_runs

    pairs = [(b, "deft") for b in ("vanilla", "iterative") if {b, "deft"} <= systems]
    if "deft" in systems:
        pairs += [("deft", s) for s in sorted(systems) if s.startswith(("chainrag", "deft-"))]
    pairs += [pair for pair in _twin_variants() if set(pair) <= systems]
    if not pairs:
        return []
    lines = [
        "",
        "Paired: deft against the baselines, its variants and ChainRAG (and a variant "
        "against the one whose settings it adds to, such as deft-none2 against "
        "deft-noexpand), on the questions both answered (McNemar exact p).",
        "",
        "| pair | shared | EM a / b | p (EM) | judged a / b | p (judged) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for base, system in pairs:
        result = compare_runs(
            RESULTS / "eval" / f"{bench}-{base}", RESULTS / "eval" / f"{bench}-{system}"
        )
        rows = {r["metric"]: r for r in result["rows"]}
        em, judged = rows.get("em", {}), rows.get("judged", {})
        lines.append(
            f"| {base} vs {system} | {result['shared']} | "
            f"{em.get('a', '-')} / {em.get('b', '-')} | "
            f"{em.get('mcnemar_p', '-')} | {judged.get('a', '-')} / {judged.get('b', '-')} | "
            f"{judged.get('mcnemar_p', '-')} |"
        )
    return lines


def sub_question_recall() -> str:
    r = load_results("sub_question_recall")
    if not r:
        return ""
    lines = [
        "## Sub-question writer: does the first sub-question find the first hop?",
        "",
        _header(r),
        "Dev questions with a gold decomposition. `empty`: no first sub-question got past "
        "the rules (each try restated the whole question), so DeFT goes straight to its "
        "fallback. Hit@10: a first-hop gold passage among the top 10 fused passages.",
        "",
        "| writer | benchmark | n | empty | hit@10 sub-question | hit@10 whole question |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for variant, by_bench in r.get("variants", {}).items():
        for bench, v in by_bench.items():
            lines.append(
                f"| {variant} | {bench} | {v['n']} | {v['empty']:.3f} | "
                f"{v['hit@10_sub_question']:.3f} | {v['hit@10_question']:.3f} |"
            )
    lines += [
        "",
        "`writer retry`: a first sub-question that restated the question was sent back to "
        "the writer, told why, which mostly restated it again. `decomposition for a "
        "reworded first step`: it is replaced by the first step of a whole decomposition "
        "(ChainRAG's plan prompt) that needs no earlier answer and passes the rules. "
        "`plan first`: `HOPRAG_SUB_QUESTIONS=plan`, where the writer is not asked at the "
        "first step; the decomposition's first askable step is the sub-question (measured "
        "on MuSiQue only).",
        "",
        "All prompts show the three most similar *training* questions with their gold "
        "decompositions (`app/data/sub_question_examples.json`, built by "
        "`python -m app.traindata`). The earlier prompt, with two fixed examples, produced "
        "no acceptable first sub-question for 45 of the first 60 MuSiQue dev questions "
        "(traces of the archived run `bench/results/archive/musique-deft-static-writer`).",
    ]
    return "\n".join(lines) + "\n"


def writer_repeats() -> str:
    r = load_results("writer_repeats")
    if not r:
        return ""
    lines = [
        "## Sub-question writer: replays where it gave up",
        "",
        _header(r),
        "Write steps of a committed DeFT run where the writer was refused twice, at least "
        "once for repeating a step it had already answered; the state at that step is "
        "rebuilt from the trace and the writer of the commit named asks again. Accepted: it "
        "now writes a sub-question the rules let through (whether a good one is in the "
        "`rows` of bench/results/writer_repeats.json). Every replayed step gave up in its "
        "run, so the run's own writer accepts none of them (the embedded model decodes "
        "greedily).",
        "",
        "| run | replays | accepted | writer of |",
        "| --- | ---: | ---: | --- |",
    ]
    for v in r["results"].values():
        lines.append(f"| {v['run']} | {v['replays']} | {v['accepted']} | {v['commit']} |")
    return "\n".join(lines) + "\n"


def graph_build() -> str:
    r = load_results("graph_build")
    if not r:
        return ""
    lines = [
        "## Sentence graph build",
        "",
        _header(r),
        "A complete build (every sentence embedded again) of an existing index's sentence "
        "graph through `hoprag graph build`; peak RSS of that process. `hoprag index` "
        "builds the same graph as part of an index build.",
        "",
        "| corpus | sentences | entity edges | semantic edges | adjacency edges | wall s | "
        "embed s | peak RSS GiB | files MiB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in r["rows"]:
        e = row["edges"]
        lines.append(
            f"| {row['corpus']} | {row['sentences']} | {e['entity']} | {e['semantic']} | "
            f"{e['adjacent']} | {row['seconds']} | {row['seconds_build']['embed']} | "
            f"{row['peak_rss_gib']} | {row['files_mib']} |"
        )
    musique = next((row for row in r["rows"] if row["corpus"] == "musique"), None)
    if musique:
        build = musique["seconds_build"]["total"]
        lines += [
            "",
            "Target: under 3 extra minutes for MuSiQue on this machine. What `hoprag index` "
            f"adds (the build itself, models already loaded): {build} s, "
            f"{'met' if build < 180 else 'not met'}. A standalone `hoprag graph build` "
            f"process, start-up and model loading included: {musique['seconds']} s, "
            f"{'met' if musique['seconds'] < 180 else 'not met'}.",
        ]
    loads = load_results("graph_load")
    if loads:
        timings = "; ".join(
            f"{row['corpus']} {row['load_seconds']} s ({row['seconds']} s with start-up)"
            for row in loads["rows"]
        )
        lines += [
            "",
            f"Loading the stored graph as every run does (`{loads['command']}`, "
            f"{loads['date'][:10]}, `hoprag graph stats` in a child process): {timings}.",
        ]
    return "\n".join(lines) + "\n"


def rewrite_recall() -> str:
    r = load_results("rewrite_recall")
    if not r:
        return ""
    lines = [
        "## Sub-question rewriting: Recall@2 of the second step's passage",
        "",
        _header(r),
        "Dev questions whose second gold step refers to the first. `reference`: the step as "
        'decomposed, "#1" read as "it"; `rewritten`: "#1" replaced by the first '
        "step's gold answer. Passages: top 2 fused passages; seeds: passages of the top 2 "
        "seed sentences of the sentence graph (`-`: the index had no sentence graph when "
        "measured). (The ChainRAG paper: 40.9 to 58.8 on MuSiQue.)",
        "",
        "| benchmark | n | reference, passages | rewritten, passages | reference, seeds | "
        "rewritten, seeds |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for bench in ("musique", "2wikimultihopqa"):
        v = r.get(bench)
        if v:
            lines.append(
                f"| {bench} | {v['n']} | {v.get('reference_passages', '-')} | "
                f"{v.get('rewritten_passages', '-')} | {v.get('reference_seeds', '-')} | "
                f"{v.get('rewritten_seeds', '-')} |"
            )
    return "\n".join(lines) + "\n"


def _share(value: float | None) -> str:
    """A table cell of a share that may be missing."""
    return "-" if value is None else f"{value:.2f}"


def _nested_rows(
    results: dict[str, dict[str, dict[str, Any]]], cells: Callable[[dict[str, Any]], list[str]]
) -> list[str]:
    """Table rows "| outer | inner | cells... |" of a two-level results dict."""
    return [
        f"| {outer} | {inner} | " + " | ".join(cells(values)) + " |"
        for outer, inner_rows in results.items()
        for inner, values in inner_rows.items()
    ]


def dense_recall() -> str:
    """How close Chroma's approximate dense search comes to exact cosine."""
    r = load_results("dense_recall")
    if not r:
        return ""
    lines = [
        "## Dense retrieval: HNSW against exact search",
        "",
        _header(r),
        "Recall of `Retriever.dense` (Chroma's HNSW index, settings as built) against a "
        "brute-force cosine ranking of the same stored vectors, on the first dev "
        "questions. Where it misses, two builds of one corpus can retrieve differently.",
        "",
        "| benchmark | questions | recall@10 | fusion depth | recall@fusion depth | "
        "lowest recall@10 |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for bench, m in r["results"].items():
        cells = [bench, str(m["questions"]), f"{m['recall_at_10']:.3f}", str(m["fusion_depth"])]
        cells += [f"{m['recall_at_fusion_depth']:.3f}", f"{m['lowest_recall_at_10']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def direct_replay() -> str:
    """Which runs today's direct-answer check would start differently."""
    r = load_results("direct_replay")
    if not r:
        return ""
    lines = [
        "## DeFT direct-answer check replayed on today's code",
        "",
        _header(r),
        "Each run's direct-answer check (SPEC step 2) replayed with today's retrieval and "
        "trained DM: where neither the question's top w nor the outcome changed, today's "
        "code takes the run's first step again.",
        "",
        "| run | replayed on | questions | direct then | direct now | top w differs | "
        "outcome changed |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, m in r["results"].items():
        cells = [name, m["commit"], str(m["replayed"]), str(m["direct_before"])]
        cells += [str(m["direct_now"]), str(m["retrieval_changed"]), str(len(m["changed"]))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def fallback_keep() -> str:
    r = load_results("fallback_keep")
    if not r:
        return ""
    lines = [
        "## DeFT fallback: which of the 2w passages to read",
        "",
        _header(r),
        f"First {r['n']} dev questions; 2w = 20 fused passages for the whole question, "
        f"scored by DM_rel (backend `{r['rel_backend']}`; as the fallback judges them, "
        "against the whole question in one batch, which the trained DM's whole-question "
        "model reads with the batch's title links since b8075d9). Gold share: mean share of a "
        "question's gold passages kept; all gold: share of questions with every gold "
        "passage kept. `vanilla`: retrieval top 5; `steps`: the loop's keep rule; `dm_*`: "
        "ranked by DM_rel; `retrieval_top5_plus_2_passing`: the retrieval top 5 plus at most "
        "2 lower-ranked passages with DM_rel >= 0.5 (what the fallback reads).",
        "",
        "| benchmark | policy | gold share | all gold | passages | words |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    lines += _nested_rows(
        r["results"],
        lambda v: [
            f"{v['gold_share']:.3f}",
            f"{v['all_gold']:.3f}",
            f"{v['passages']:.2f}",
            f"{v['words']:.0f}",
        ],
    )
    return "\n".join(lines) + "\n"


def deft_costs() -> str:
    r = load_results("deft_costs")
    if not r:
        return ""
    purposes = sorted({k for row in r["rows"] for k in row["calls"]})
    sources = sorted({k for row in r["rows"] for k in row["words"]})
    lines = [
        "## DeFT: where the LLM calls and words go",
        "",
        _header(r),
        "Read from the traces of committed runs (first 60 dev questions). Calls per question "
        "by purpose: `write` is the sub-question writer with its refused tries and "
        "decompositions (what the other purposes leave of the total), `rewrite` the guard, "
        "`dm_*` decisions served by the chat model. Words per question by the reading that "
        "first fed a passage: `passing` (two or more passed the relevance filter), "
        "`one_passed_top2`, `none_passed` (none passed: the top `HOPRAG_NONE_KEPT` read), "
        "of which `none_passed_rank3+` came from ranks 3 to 5, `fallback`.",
        "",
        "| run | calls | " + " | ".join(purposes) + " | words | " + " | ".join(sources) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in purposes + sources) + " | ---: |",
    ]
    for row in r["rows"]:
        lines.append(
            f"| {row['run']} | {row['llm_calls']} | "
            + " | ".join(str(row["calls"].get(k, 0)) for k in purposes)
            + f" | {row['words_fed']:.0f} | "
            + " | ".join(f"{row['words'].get(k, 0):.0f}" for k in sources)
            + " |"
        )
    lines += [
        "",
        "Questions by the number of sub-question steps they took: n, EM, LLM calls and "
        "words per question. A question answered in two steps costs at least five calls "
        "(two sub-questions, two answers, the final answer); 0 steps is the direct answer.",
        "",
        "| run | " + " | ".join(f"{k} step{'s' * (k != 1)}" for k in range(7)) + " |",
        "| --- | " + " | ".join("---" for _ in range(7)) + " |",
    ]
    for row in r["rows"]:
        cells = [row["by_steps"].get(str(k)) for k in range(7)]
        lines.append(
            f"| {row['run']} | "
            + " | ".join(
                f"{c['n']}: {c['em']:.2f}, {c['llm_calls']}, {c['words_fed']}" if c else "-"
                for c in cells
            )
            + " |"
        )
    lines += [
        "",
        "Where a step whose relevance filter passed nothing found the question's first gold "
        "passage among what it read (ranked by DM_rel), and the questions whose top-w "
        "passages hold every gold passage (where a perfect direct-answer check would answer "
        "at once, in one call): EM of the run there, and of the readers a direct answer "
        "stands between (`vanilla`: the top 5; `oracle`: only the gold passages).",
        "",
        "| run | none-passed steps | gold in top 2 | only at rank 3+ | no gold | all gold in "
        "top w | run EM there | vanilla EM | oracle EM |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in r["rows"]:
        where, direct = row["none_passed_steps"], row["direct_eligible"]
        lines.append(
            f"| {row['run']} | {sum(where.values())} | {where.get('top2', 0)} | "
            f"{where.get('rank3+', 0)} | {where.get('no_gold', 0)} | {direct['n']} | "
            f"{direct['run_em']} | {direct.get('vanilla_em', '-')} | "
            f"{direct.get('oracle_em', '-')} |"
        )
    return "\n".join(lines) + "\n"


def cost_floor() -> str:
    r = load_results("cost_floor")
    if not r:
        return ""
    lines = [
        "## DeFT: the least its rules can spend",
        "",
        _header(r),
        "What SPEC section 1 still spends with a perfect writer (one call per sub-question), "
        "a perfect DM and right answers (`bench/cost_floor.py` says how each is counted): "
        "`loop`, the sub-question loop alone (two calls a hop and the final answer, none "
        "where the QA table's rules decide a comparison; each step reads its gold passage "
        "and the one ranked next); `direct`, the same with every question of at most 2 hops "
        "whose top-w passages hold all gold ones answered in one call from them. QA-cache "
        "hits are not counted (the runs start cold; the cache study below measures them). "
        "On the questions the "
        "direct path would take: EM of the run and of the `oracle` reader (the same model "
        "handed the gold passages in one call) and how the run's own direct-answer check "
        "ended (`depth`: the DM's depth estimate said more than 2 hops; `direct`: DM_direct "
        "was below its threshold). Issue 4's targets: at most 4.8 LLM calls "
        "and 390 words per question.",
        "",
        "| run | n | run calls | loop floor | direct floor | run words | loop floor | "
        "direct floor | direct would take | run EM there | oracle EM there | the run's "
        "direct-answer check there |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    rows = r["rows"]
    for row in rows:
        taken = row["direct_taken"]
        lines.append(
            f"| {row['run']} | {row['n']} | {row['run_cost']['llm_calls']} | "
            f"{row['loop_floor']['llm_calls']} | {row['direct_floor']['llm_calls']} | "
            f"{row['run_cost']['words_fed']:.0f} | {row['loop_floor']['words_fed']:.0f} | "
            f"{row['direct_floor']['words_fed']:.0f} | {taken['n']} | {taken['run_em']} | "
            f"{taken['oracle_em'] if taken['oracle_em'] is not None else '-'} | "
            + ", ".join(f"{k}: {v}" for k, v in sorted(taken["run_check"].items()))
            + " |"
        )

    def mean_of(key: str, what: str) -> float:
        return sum(row[key][what] for row in rows) / len(rows)

    lines.append(
        f"| mean of the runs | | {mean_of('run_cost', 'llm_calls'):.2f} | "
        f"{mean_of('loop_floor', 'llm_calls'):.2f} | {mean_of('direct_floor', 'llm_calls'):.2f} | "
        f"{mean_of('run_cost', 'words_fed'):.0f} | {mean_of('loop_floor', 'words_fed'):.0f} | "
        f"{mean_of('direct_floor', 'words_fed'):.0f} | | | | |"
    )
    return "\n".join(lines) + "\n"


def direct_threshold() -> str:
    """The direct-answer check's threshold, replayed by mixing two runs per question."""
    r = load_results("direct_threshold")
    if not r:
        return ""
    results = r["results"]
    disagree = ", ".join(f"{b} {m['disagree']}" for b, m in results.items())
    lines = [
        "## DeFT: where the direct-answer threshold could sit",
        "",
        _header(r),
        "Each benchmark's `deft` run mixed per question with its `deft-alldirect` twin, "
        "which answers directly every question the QA table's rules do not decide (both "
        "thresholds of the check at 0; `bench/direct_threshold.py` says why the mix is "
        "what that gate would give): a gate `t = x` sends direct the questions whose depth "
        "estimate reaches `tau_shallow` and whose DM_direct reaches x; `gold in top w` "
        "takes exactly those whose top w holds every gold passage; `every question` all. "
        f"`t = {next(iter(results.values()))['tau_direct']}` is the shipped gate; the "
        f"questions where it disagrees with the `deft` run's own check: {disagree}. "
        "`EM of taken`: on the questions the gate takes, answered directly / as the "
        "`deft` run answered them.",
        "",
        "| benchmark | gate | taken | EM | judged | LLM calls | words | EM of taken |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for bench, m in results.items():
        for gate, g in m["gates"].items():
            lines.append(
                f"| {bench} | {gate} | {g['taken']} | {g['em']:.3f} | {g['judged']:.3f} | "
                f"{g['llm_calls']} | {g['words_fed']} | "
                f"{_cell(g['taken_em_direct'])} / {_cell(g['taken_em_shipped'])} |"
            )
    for gate in next(iter(results.values()))["gates"]:
        rows = [m["gates"][gate] for m in results.values()]
        lines.append(
            f"| mean of the benchmarks | {gate} | | {mean(g['em'] for g in rows):.3f} | "
            f"{mean(g['judged'] for g in rows):.3f} | "
            f"{mean(g['llm_calls'] for g in rows):.2f} | "
            f"{mean(g['words_fed'] for g in rows):.1f} | |"
        )
    return "\n".join(lines) + "\n"


def deft_errors() -> str:
    r = load_results("deft_errors")
    if not r:
        return ""
    stages = list(r["rows"][0]["lost_at"])  # in bench.deft_errors.STAGES order
    lines = [
        "## DeFT: where wrong answers lost the gold answer",
        "",
        _header(r),
        "Read from the traces of committed runs (first 60 dev questions): each question with "
        "EM 0 at the first stage where the gold answer (or an alias, normalised, as whole "
        "words) went missing. `never_read`: no passage fed to any reader holds it; "
        "`read_not_taken`: one did, but neither a QA-table row nor the prediction took it; "
        "`in_table_lost`: a row held it, the final answer did not; `in_answer`: the "
        "prediction holds it in other words; `yes_no`: a yes/no gold answer. `stopped "
        "short`: wrong answers from the QA table with fewer rows than gold passages (the "
        "sufficiency check stopped before the chain was complete; an upper bound, as a row "
        "can state two hops). Vanilla rows are the same count for its one reading.",
        "",
        "| run | wrong | " + " | ".join(f"`{s}`" for s in stages) + " | stopped short |",
        "| --- | ---: | " + " | ".join("---:" for _ in stages) + " | ---: |",
    ]
    for row in r["rows"]:
        lines.append(
            f"| {row['run']} | {row['wrong']} | "
            + " | ".join(str(row["lost_at"][s]) for s in stages)
            + f" | {row['table_endings_stopped_short']} |"
        )
    return "\n".join(lines) + "\n"


def reader_replay() -> str:
    r = load_results("reader_replay")
    if not r:
        return ""
    lines = [
        "## Reader prompts: final answers replayed",
        "",
        _header(r),
        "The step that wrote each reply of a committed run (vanilla and oracle: reading the "
        "passages fed; DeFT: the fallback or LLM_fin) asked again, with the prompts of the "
        "commit named, on exactly the inputs the run's reader saw. `yes-no`: questions that "
        'ask whether something is so ("Are both ...?"); `fallback-rows`: DeFT fallbacks that '
        "had QA-table rows. EM counts questions.",
        "",
        "| run | questions | replayed | prompts of | EM before | EM after |",
        "| --- | --- | ---: | --- | ---: | ---: |",
    ]
    for v in r["results"].values():
        lines.append(
            f"| {v['run']} | {v['only']} | {v['replayed']} | {v['commit']} | "
            f"{v['em_before']:.0f} | {v['em_after']:.0f} |"
        )
    if r.get("note"):
        lines += ["", r["note"]]
    return "\n".join(lines) + "\n"


def qa_cache_study() -> str:
    from bench.cache_study import RUNS, study

    r = study()
    if not r:
        return ""
    on, off = r["on"], r["off"]
    hits = on["lookups"]["exact"] + on["lookups"]["similar"]
    looked = hits + on["lookups"]["miss"]
    lines = [
        "## QA cache on and off",
        "",
        f"`deft` on the first MuSiQue dev questions with the QA cache on (starting cold) "
        f"and off: run folders `{RUNS['on']}` and `{RUNS['off']}`, made by "
        "`.venv/bin/python -m bench.run_systems --benchmarks musique --systems deft "
        "deft-nocache --limit 100 --tag 100q`; figures from `.venv/bin/python -m "
        "bench.cache_study`.",
        "",
        "| cache | n | EM | judged | LLM calls / q | LLM calls | median s | lookups | "
        "exact hits | similar hits | hit rate |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, v in (("on", on), ("off", off)):
        cached = name == "on"
        lines.append(
            f"| {name} | {v['n']} | {v['em']:.3f} | {v['judged']:.3f} | {v['llm_calls']:.2f} "
            f"| {v['total_llm_calls']} | {v['seconds_median']:.1f} | "
            + (
                f"{looked} | {on['lookups']['exact']} | {on['lookups']['similar']} | "
                f"{hits / max(1, looked):.3f} |"
                if cached
                else "- | - | - | - |"
            )
        )
    same = on["lookups"]
    lines += [
        "",
        f"Both rows count the {on['n']} questions both runs have answered. LLM calls saved "
        f"by the cache: {off['total_llm_calls'] - on['total_llm_calls']} (off minus on; the "
        "two runs may also differ where a cached answer changes what the writer asks "
        f"next). Same-question checks of similar cached sub-questions: {same['rule_no']} "
        f"refused by the wording rule without a model call, {same['dm_yes']} confirmed and "
        f"{same['dm_no']} refused by DM_same.",
    ]
    for key, name in RUNS.items():
        note = RESULTS / "eval" / name / "note.md"
        if note.is_file():
            lines += ["", f"- cache {key} (`{name}`): {note.read_text().strip()}"]
    return "\n".join(lines) + "\n"


def dm_calibration() -> str:
    """The decision model's per-kind calibration, fitted on train questions."""
    from tools.decision import CALIBRATION_FILE

    if not CALIBRATION_FILE.is_file():
        return ""
    data = json.loads(CALIBRATION_FILE.read_text())
    notes = data.get("notes", {})
    lines = [
        "## Decision model calibration",
        "",
        f"Fitted on train questions only with `.venv/bin/{notes.get('command', '')}`; "
        "stored in `app/data/dm_calibration.json`. p = sigmoid(a * x + b), x the logit "
        "of the zero-shot p(yes) (or the cosine, for `rel`). A kind whose slope `a` is "
        "not positive carries no signal and is switched off.",
        "",
        "| kind | backend | a | b | n | positives | labels |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for kind, platt in data.get("platt", {}).items():
        note = notes.get(kind, {})
        lines.append(
            f"| {kind} | {data['backends'].get(kind, 'llm')} | {platt['a']:.3f} | "
            f"{platt['b']:.3f} | {note.get('n', '-')} | {note.get('positives', '-')} | "
            f"{note.get('labels', '')} |"
        )
    lines += [
        "",
        "These are the zero-shot backends; their dev AUC and calibration error, next to the "
        "trained DM's, are in the section on the trained DM below.",
    ]
    return "\n".join(lines) + "\n"


def dm_recipes() -> str:
    """Which recipe trains the decision model: dev AUC per kind (raw logits)."""
    r = load_results("dm_recipes")
    if not r:
        return ""
    kinds = ("rel", "suff", "same", "depth")
    lines = [
        "## Decision model: training recipes",
        "",
        _header(r),
        r.get("notes", ""),
        "AUC on the `dev` examples of each kind (calibration cannot change it), one training "
        "run per recipe (seed 13). The base is MiniLM-L6 as a cross-encoder in every row.",
        "",
        "| recipe | epochs | lr | LoRA r | batches | train s | " + " | ".join(kinds) + " |",
        "| --- | ---: | ---: | ---: | --- | ---: | " + " | ".join("---:" for _ in kinds) + " |",
    ]
    for name, row in r["rows"].items():
        recipe = row["recipe"]
        lora = recipe["lora"]["r"] if recipe["lora"] else "full"
        aucs = " | ".join(_cell(row["dev_auc"].get(k)) for k in kinds)
        lines.append(
            f"| {name} | {recipe['epochs']} | {recipe['learning_rate']} | {lora} | "
            f"{row.get('batching', 'length buckets')} | {row['train_seconds']} | {aucs} |"
        )
    return "\n".join(lines) + "\n"


def dm_train() -> str:
    """The DM trained from scratch on this machine by the two user-facing commands."""
    r = load_results("dm_train")
    if not r:
        return ""
    minutes = (r["data_seconds"] + r["train_seconds"]) / 60
    return (
        "\n".join(
            [
                "## Decision model: training from scratch on this machine",
                "",
                _header(r),
                f"`hoprag dm data`: {r['data_seconds']} s (peak {r['data_peak_rss_gib']} GiB). "
                f"`hoprag dm train` on {r['device']}: {r['train_seconds']} s (peak "
                f"{r['train_peak_rss_gib']} GiB), of which {r['fit_seconds']} s LoRA training on "
                f"{r['train_examples']} examples and {r['calibration_seconds']} s calibration. "
                f"Together {minutes:.1f} minutes against the 60-minute budget.",
                *(
                    [
                        "By adapter: "
                        + "; ".join(
                            f"{name} ({', '.join(a['kinds'])}): {a['train_examples']} examples, "
                            f"{a['train_seconds']} s"
                            for name, a in r["adapters"].items()
                        )
                        + "."
                    ]
                    if "adapters" in r
                    else []
                ),
                *_loss_curves(r.get("adapters", {})),
                *([r["notes"]] if r.get("notes") else []),
                *_scratch_dm_eval(),
            ]
        ).rstrip()
        + "\n"
    )


def _loss_curves(adapters: dict[str, Any]) -> list[str]:
    """Each adapter's training loss by kind, mean per 100 batches, first to last."""
    lines = []
    for name, a in adapters.items():
        curves = a.get("loss_per_100_batches_by_kind")
        if curves:
            lines.append(
                f"Training loss of `{name}` by kind, mean per 100 batches: "
                + "; ".join(
                    f"{kind} " + " ".join(f"{v:.2f}" for v in curve)
                    for kind, curve in curves.items()
                )
                + "."
            )
    return lines


def _scratch_dm_eval() -> list[str]:
    """The DM that run trained (`--keep DIR`) on dev, beside the shipped one (the same
    seeded samples): a verbatim copy of the dm_eval.json of `hoprag dm eval --dm DIR`."""
    scratch = load_results("dm_train_eval")
    if not scratch or not DM_EVAL_REPORT.is_file():
        return []
    # The shipped DM as scored beside it, on the same dm_data (a later `hoprag dm eval`
    # may score another DM, or rebuilt examples).
    shipped = scratch.get("shipped") or json.loads(DM_EVAL_REPORT.read_text())
    lines = [
        "",
        f"Measured {scratch['date']} on {machine()} with `.venv/bin/{scratch['command']}`. "
        "The DM this run trained, on the dev examples `hoprag dm eval` scored the shipped DM "
        f"on at {shipped.get('date', scratch['date'])} (the same seeded sample; the shipped "
        "`main` adapter was trained on a GPU, when it judged `same` too):",
        *([scratch["notes"]] if scratch.get("notes") else []),
        "",
        "| kind | n | shipped AUC | shipped ECE | from scratch AUC | from scratch ECE |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind in ("rel", "direct", "depth", "suff", "same"):
        m, ours = scratch[kind]["trained"], shipped[kind]["trained"]
        lines.append(
            f"| {kind} | {m['n']} | {ours['auc']:.3f} | {ours['ece']:.3f} | "
            f"{m['auc']:.3f} | {m['ece']:.3f} |"
        )
    fit = load_results("dm_fit")
    if fit:
        lines += ["", _header(fit), f"AUC on a seeded sample of {fit['n']} `train` examples:", ""]
        for name, aucs in fit["results"].items():
            lines.append(f"- {name}: " + "; ".join(f"{g} {v:.3f}" for g, v in aucs.items()))
    return lines


def _dm_latency() -> list[str]:
    r = load_results("dm_latency")
    if not r:
        return []
    verdict = "met" if r["median_ms"] < 150 else "NOT met"
    return [
        "",
        f"Solo: {_header(r)}Relevance of {r['passages']} passages in one call: median "
        f"{r['median_ms']} ms, p90 {r['p90_ms']} ms over {r['batches']} batches; the 150 ms "
        f"target is {verdict}.",
    ]


def dm_eval() -> str:
    """The shipped DM against the zero-shot backends on dev, with reliability diagrams."""
    if not DM_EVAL_REPORT.is_file():
        return ""
    r = json.loads(DM_EVAL_REPORT.read_text())
    targets = {"rel": 0.95, "direct": 0.90, "suff": 0.90, "same": 0.95}
    lines = [
        "## Decision model: trained versus zero-shot on dev",
        "",
        f"Measured {r['date']} on {machine()} with `.venv/bin/{r['command']}`; trained DM "
        f"recipe {json.dumps(r['trained_dm'].get('recipe'))}.",
        "The trained DM (as served: its fused int8 ONNX runtime) is scored on a seeded "
        "sample of at most 1,500 dev examples per kind, the zero-shot chat-model backend on "
        "a few dozen of those (its calls take seconds); the `trained DM, paired` rows score "
        "the trained DM on exactly the zero-shot backend's examples, which is the comparison "
        "that decides who serves a kind. Rows named for a query type split `rel` by what "
        "the passage was judged against: the whole question (every gold passage counts as "
        "relevant, including later hops' passages that nothing in the question names; the "
        "trained DM judges these as the direct answer and the fallback do, in a batch with "
        "the question's top-w passages, whose title links its whole-question model reads: "
        "`app.dm.features.question_rel_features`) or one gold sub-question (the graph's "
        "per-step relevance filter). Targets: AUC >= "
        + ", ".join(f"{k} {v}" for k, v in targets.items())
        + "; ECE <= 0.05.",
        "",
        "| kind | backend | n | positives | AUC | accuracy at threshold | ECE | target met |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for kind, row in r.items():
        if not isinstance(row, dict) or "trained" not in row:
            continue
        rows = [("trained DM", row["trained"])]
        if "trained_paired" in row and row["trained_paired"]["n"] != row["trained"]["n"]:
            rows.append(("trained DM, paired", row["trained_paired"]))
        rows.append((row["zero_shot"]["backend"], row["zero_shot"]))
        for query, pair in row.get("by_query", {}).items():
            rows.append((f"trained DM, {query} queries", pair["trained"]))
            rows.append((f"{row['zero_shot']['backend']}, {query} queries", pair["zero_shot"]))
        for name, m in rows:
            met = "yes" if (m["auc"] or 0) >= targets.get(kind, 0) and m["ece"] <= 0.05 else "no"
            lines.append(
                f"| {kind} | {name} | {m['n']} | {m['positives']} | {_cell(m['auc'])} | "
                f"{_cell(m['accuracy'])} | {_cell(m['ece'])} | {met} |"
            )
    latency = r.get("rel_latency_ms", {})
    lines += [
        "",
        f"The trained DM serves: {', '.join(r.get('use_for', [])) or 'nothing'} (where its "
        "paired AUC is at least the zero-shot one and its AUC at least 0.8). Relevance of "
        "10 passages: median "
        f"{_cell(latency.get('median'))} ms, p90 {_cell(latency.get('p90'))} ms over "
        f"{latency.get('batches')} batches (target: under 150 ms).",
        *([r["notes"]] if r.get("notes") else []),
        *_dm_latency(),
        "",
        " ".join(
            f"![{kind}](dm_eval/reliability_{kind}.png)"
            for kind in r
            if (DM_EVAL_REPORT.parent / f"reliability_{kind}.png").is_file()
        ),
    ]
    return "\n".join(lines) + "\n"


def direct_models() -> str:
    r = load_results("direct_models")
    if not r:
        return ""
    lines = [
        "## Decision model: the direct model",
        "",
        _header(r),
        f"DM_direct is a logistic model over features of the question's top-w passages "
        "(`app.dm.features.direct_features`: relevance, relevance carried over title links, "
        "the depth estimate, titles named in the question, the whole-question relevances "
        "and how many pass) and of the retrieval that found them "
        "(`Retriever.retrieval_signals`: the fused score at rank 2, its lead over rank 3, "
        "the best BM25 score), fitted on the "
        f"{r['fit_examples']} `direct` examples of `train` and `calib` and scored on all "
        "`dev` ones. The shipped model also uses the features' squares and pairwise "
        "products; `no retrieval signals` is the model that judges text the sentence-graph "
        "walk gathered (`direct_gathered`, and the shipped `direct` before them); "
        "`per-passage relevance only` drops the whole-question relevances too (as shipped "
        "before them). Per benchmark too: the overall AUC also rewards telling the "
        "benchmarks apart. Every model, the shipped one too, is refitted on the examples "
        "`hoprag dm data` wrote for this run. `taken`: the share of questions whose "
        "probability reaches "
        f"`tau_direct` = {r.get('threshold', 0.7)} (the direct answer takes them); "
        "`precision`: the share of those whose top w holds every gold passage.",
        "",
        "| model | group | n | positives | AUC | ECE | taken | precision |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += _nested_rows(
        r["results"],
        lambda m: [
            str(m["n"]),
            str(m["positives"]),
            f"{m['auc']:.3f}",
            f"{m['ece']:.3f}",
            _share(m.get("taken")),
            _share(m.get("precision")),
        ],
    )
    return "\n".join(lines) + "\n"


def depth_models() -> str:
    r = load_results("depth_models")
    if not r:
        return ""

    lines = [
        "## Decision model: the depth model",
        "",
        _header(r),
        "The depth estimate (SPEC step 2: a direct answer only for questions of at most two "
        "hops) is a logistic model over the question's embedding and the depth adapter's "
        f"logit (`app.dm.train.fit_depth`), fitted on the {r['fit_examples']} `depth` rows "
        f"of `train` and `calib`, {r['extra_examples']} of them `extra_train`'s HotpotQA "
        "questions (all 2-hop), with ridge "
        f"{r['ridge']}; `extra` and `deep` are the weights of those questions and of deep "
        "ones, chosen on dev from this grid. `shallow passing`: the share of questions of "
        "at most two hops whose estimate reaches "
        f"`tau_shallow` = {r['threshold']} (the direct answer can take them); `deep passing`: "
        "the share of deeper ones that do (it may take them wrongly). HotpotQA has only "
        "2-hop questions, so it has no AUC. The adapter alone served depth before; the "
        '`depth` rows of "trained versus zero-shot on dev" above score the model, as served.',
        "",
        "| model | group | n | deep | AUC | ECE | shallow passing | deep passing |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += _nested_rows(
        r["results"],
        lambda m: [
            str(m["n"]),
            str(m["deep"]),
            _cell(m["auc"]),
            _cell(m["ece"]),
            _share(m["shallow_passing"]),
            _share(m["deep_passing"]),
        ],
    )
    return "\n".join(lines) + "\n"


def same_calibration() -> str:
    """DM_same per split and kind of pair: the shared adapter's shortcut, and its fix."""
    r = load_results("same_calibration")
    if not r:
        return ""
    lines = [
        "## Decision model: the trained `same` per kind of pair",
        "",
        _header(r),
        "The trained cross-encoder's calibrated p(same) per split and per kind of pair, "
        "for each DM on the same examples. Template pairs put a relation's template against "
        'its plain form ("What is the R of S?"); near misses come in both forms (`-plain`), '
        "and `near-miss-peer` swaps in another subject of the same relation; `llm-*` pairs "
        "use the chat model's rewordings of each relation (`hoprag dm rewordings`, train "
        "and dev reworded apart). `before` is the `same` adapter of 815b767, trained on "
        "template pairs only (`git worktree add /tmp/old 815b767`, then "
        "`--dm before=/tmp/old/app/data/dm`); `shipped` is trained on the rewordings too.",
        "",
        "| DM | split | n | AUC | ECE | kind of pair | label | mean p "
        f"| share p >= {r['tau_same']} |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for name, splits in r["results"].items():
        for split, m in ((s, splits[s]) for s in ("train", "calib", "dev")):
            for i, (how, h) in enumerate(m["by_how"].items()):
                head = [name, split, str(m["n"]), f"{m['auc']:.3f}", f"{m['ece']:.3f}"]
                share = h["share_at_or_above_tau_same"]
                cells = [how, str(h["label"]), f"{h['mean_p']:.3f}", f"{share:.3f}"]
                lines.append("| " + " | ".join((head if not i else [""] * 5) + cells) + " |")
    probes = {name: m["probes"] for name, m in r["results"].items() if "probes" in m}
    if probes:
        names = list(probes)
        lines += [
            "",
            "Hand-written pairs that no template makes (`bench.same_calibration.PROBES`), "
            "p(same) of each DM:",
            "",
            "| first | second | label | " + " | ".join(names) + " |",
            "| --- | --- | ---: | " + " | ".join("---:" for _ in names) + " |",
        ]
        for i, probe in enumerate(probes[names[0]]):
            ps = " | ".join(f"{probes[n][i]['p']:.3f}" for n in names)
            lines.append(f"| {probe['first']} | {probe['second']} | {probe['label']} | {ps} |")
    return "\n".join(lines) + "\n"


def suff_models() -> str:
    """DM_suff before and after its near-miss negatives, on dev and on replayed checks."""
    r = load_results("suff_models")
    if not r:
        return ""
    kinds = ("all", "chain-prefix", "wrong-step", "repeated-step")
    lines = [
        "## Decision model: sufficiency against near-miss tables (not shipped)",
        "",
        _header(r),
        r.get("notes", ""),
        "",
        "Dev AUC of the whole gold chain (yes) against all negatives and against each "
        "kind alone (in brackets: how many dev negatives of that kind):",
        "",
        "| DM | " + " | ".join(kinds) + " | ECE |",
        "| --- | " + " | ".join("---:" for _ in kinds) + " | ---: |",
    ]
    for name, dev in r["dev"].items():
        cells = [
            f"{dev[k]['auc']:.3f}" + (f" ({dev[k]['negatives']})" if "negatives" in dev[k] else "")
            if k in dev
            else "-"
            for k in kinds
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {dev['all']['ece']:.3f} |")
    lines += [
        "",
        "Sufficiency checks of committed runs asked again (those the DM decided; the date "
        "comparisons the rule decides are left out): of the questions a check ended "
        "(answered from the QA table), how many each DM still ends there, by whether the "
        "run's answer was right; and of the checks the run answered no, how many each DM "
        "answers yes.",
        "",
        "| run | DM | ended, right | ended, wrong | no checks now yes |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for run, rr in r["runs"].items():
        ended = rr["ended_by_check"]
        for name in r["dev"]:
            lines.append(
                f"| {run} | {name} | {ended['right'].get(name, 0)} of {ended['right']['n']} | "
                f"{ended['wrong'].get(name, 0)} of {ended['wrong']['n']} | "
                f"{rr['of_those_now_yes'][name]} of {rr['checks_said_no']} |"
            )
    return "\n".join(lines) + "\n"


def dm_in_graph() -> str:
    """The DeFT graph with the trained DM against the zero-shot DM (`deft` vs
    `deft-zeroshot`), per benchmark, on the questions both runs answered."""
    from app.errors import UserError
    from app.eval.report import compare_runs

    rows = []
    for bench in BENCHMARKS:
        trained, zero_shot = (RESULTS / "eval" / f"{bench}-{s}" for s in ("deft", "deft-zeroshot"))
        if not (trained / "results.jsonl").is_file() or not (zero_shot / "results.jsonl").is_file():
            continue
        try:
            result = compare_runs(trained, zero_shot)
        except UserError:  # a run just started: no question answered by both yet
            continue
        m = {r["metric"]: r for r in result["rows"]}
        for name, side in (("trained", "a"), ("zero-shot", "b")):
            dm_seconds = m.get("dm_seconds", {}).get(side)  # older runs did not time the DM
            share = dm_seconds / m["seconds"][side] if dm_seconds is not None else None
            rows.append(
                f"| {bench} | {name} | {result['shared']} | "
                + " | ".join(_cell(m[k][side]) for k in ("em", "f1", "judged", "llm_calls"))
                + f" | {_cell(m['seconds'][side])} | "
                f"{_cell(dm_seconds)} | {_cell(share)} |"
                + (
                    f" {m['em']['mcnemar_p']} / {m['judged']['mcnemar_p']} |"
                    if side == "b"
                    else " |"
                )
            )
    if not rows:
        return ""
    return "\n".join(
        [
            "## Decision model in the graph: trained versus zero-shot",
            "",
            "`deft` (trained DM where `dm.json` lists it) against `deft-zeroshot` "
            "(`HOPRAG_TRAINED_DM=off`), first 60 dev questions, means over the questions both "
            "answered (`hoprag eval compare bench/results/eval/B-deft "
            "bench/results/eval/B-deft-zeroshot`). The runs' commits and what shared the "
            "machine with them are in their notes (End-to-end answering, below); seconds are "
            "means per question, DM share is DM seconds over them.",
            "",
            "| benchmark | DM | shared | EM | F1 | judged | LLM calls | seconds | DM seconds "
            "| DM share | p (EM / judged) |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
            *rows,
            "",
        ]
    )


def serveload_results() -> str:
    """Chats at once against one `hoprag serve` on the sample corpus."""
    runs = [load_results(f.stem) for f in sorted(RESULTS.glob("serve_load-*.json"))]
    if not runs:
        return ""
    lines = [
        "## Serving under load",
        "",
        "Each run is a new chat thread asking one single-hop question of the sample corpus "
        "through `langgraph_sdk`, against one `hoprag serve` (embedded 1.5B model; `run` names "
        "its server). Correct: "
        "the answer contains the gold answer.",
        "",
        "| graph | run | concurrent | runs | correct | runs/min | p50 s | p90 s | p95 s | max s | "
        "measured | machine | command |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for r in runs:
        lat = r["latency_s"]
        lines.append(
            f"| {r['graph']} | {r.get('label') or 'llama-server'} | {r['concurrency']} | "
            f"{r['runs']} | {r['correct']} | "
            f"{r['runs_per_min']} | {lat['p50']} | {lat['p90']} | {lat['p95']} | {lat['max']} | "
            f"{r['date'][:10]} | {r['machine']} | `{r['command']}` |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    sections = [
        INTRO,
        index_build(),
        retrieval_recall(),
        serving(),
        dm_calibration(),
        dm_recipes(),
        dm_train(),
        dm_eval(),
        direct_models(),
        depth_models(),
        same_calibration(),
        suff_models(),
        dm_in_graph(),
        sub_question_recall(),
        writer_repeats(),
        graph_build(),
        rewrite_recall(),
        dense_recall(),
        direct_replay(),
        fallback_keep(),
        reader_replay(),
        evaluations(),
        deft_speed(),
        deft_costs(),
        cost_floor(),
        direct_threshold(),
        deft_errors(),
        qa_cache_study(),
        serveload_results(),
    ]
    print("\n".join(s for s in sections if s).rstrip())


if __name__ == "__main__":
    main()
