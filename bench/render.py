"""Render docs/BENCHMARKS.md from the committed results in bench/results/.

    .venv/bin/python -m bench.render > /tmp/B.md && cp /tmp/B.md docs/BENCHMARKS.md

One section per target: a table from a results file, with the date, machine and command
that made it, and a line or two saying whether the target is met. Numbers are never typed
by hand. Finished studies are not rendered: they are one line each in docs/decisions.md.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from itertools import takewhile
from pathlib import Path
from statistics import mean
from typing import Any

from app.eval.run import load_run, summarise
from bench.common import (
    BENCHMARKS,
    RESULTS,
    ROOT,
    TUNING_SIZE,
    load_results,
    machine,
    run_name,
)

INTRO = f"""# Benchmarks

Where hoprag stands against each target its issues set. Every number comes from a script
in `bench/` and is rendered from `bench/results/` by `python -m bench.render`; each table
names the date, machine and command that made it. Unless it says otherwise, the machine
is a 2-core x86_64 CPU (24 GiB, no GPU) and the chat model the embedded 1.5B one
(Qwen2.5-Coder-1.5B-Instruct, 4-bit GGUF). The data are the MuSiQue, 2WikiMultihopQA and
HotpotQA files under `HOPRAG_DATA`. What earlier studies tried and decided is in
[decisions.md](decisions.md), one line each.

Levers are tuned on the first {TUNING_SIZE} dev questions of each benchmark, the tuning
slice. Dev questions {TUNING_SIZE + 1} and up form the validation slice
(`bench.run_systems --slice validation`), which nobody tunes on: a lever is adopted only
when the validation slice agrees, without iterating on it (issue 52).
"""

DM_EVAL_REPORT = ROOT / "docs" / "dm_eval" / "dm_eval.json"  # written by `hoprag dm eval`

# The last deft run of each benchmark on llama-cpp-python's server, archived (under this
# name) when deft is rerun on llama-server with the same graph code.
DEFT_BEFORE_SERVER = {
    "musique": "musique-deft-0c983a4",
    "2wikimultihopqa": "2wikimultihopqa-deft-30cb0fd",
    "hotpotqa": "hotpotqa-deft-081559a",
}

# The last deft run of each benchmark that read whole passages, archived when deft was
# rerun reading sentences (issue 34's first lever).
DEFT_PASSAGE_READING = {
    "musique": "musique-deft-4360ebb",
    "2wikimultihopqa": "2wikimultihopqa-deft-4360ebb",
    "hotpotqa": "hotpotqa-deft-4360ebb",
}

# The last deft run of each benchmark whose steps chose passages and sentences by DM_rel
# alone, archived when deft was rerun fusing DM_rel with retrieval rank (issue 34's
# second lever).
DEFT_DM_ORDER = {
    "musique": "musique-deft-9e3d0d0",
    "2wikimultihopqa": "2wikimultihopqa-deft-9e3d0d0",
    "hotpotqa": "hotpotqa-deft-9e3d0d0",
}

# The last deft run of each benchmark whose sufficiency check took DM_suff's word for a
# question judged deeper than 2 hops from its first row, archived when deft was rerun
# with `DEEP_MIN_ROWS`.
DEFT_FUSED = {
    "musique": "musique-deft-c3484d8",
    "2wikimultihopqa": "2wikimultihopqa-deft-c3484d8",
    "hotpotqa": "hotpotqa-deft-c3484d8",
}

# The last deft run of each benchmark whose writer, its sub-question refused, was asked
# again before the plan's next step, and whose one-hop questions went to the fallback,
# archived when deft was rerun taking the plan's step first.
DEFT_DEEP = {
    "musique": "musique-deft-1e8ec98",
    "2wikimultihopqa": "2wikimultihopqa-deft-1e8ec98",
    "hotpotqa": "hotpotqa-deft-1e8ec98",
}

# The last deft run of each benchmark whose writer was asked at every step, its
# sub-question refused replaced by the plan's next step, archived when deft was rerun
# taking a kept plan's steps before the writer.
DEFT_REFUSED = {
    "musique": "musique-deft-bc6bd58",
    "2wikimultihopqa": "2wikimultihopqa-deft-bc6bd58",
    "hotpotqa": "hotpotqa-deft-bc6bd58",
}

# The last deft run of each benchmark whose steps walked the sentence graph again after
# an unknown answer, archived when deft was rerun walking it only when nothing retrieved
# was relevant.
DEFT_KEPT_PLAN = {
    "musique": "musique-deft-79004bf",
    "2wikimultihopqa": "2wikimultihopqa-deft-79004bf",
    "hotpotqa": "hotpotqa-deft-79004bf",
}

# The last deft run of each benchmark whose fallback searched and read the question as
# asked, archived when deft was rerun reading it with the table's answers in place.
DEFT_NO_SECOND_READ = {
    "musique": "musique-deft-81529a9",
    "2wikimultihopqa": "2wikimultihopqa-deft-81529a9",
    "hotpotqa": "hotpotqa-deft-81529a9",
}

# The last deft run of each benchmark whose writer could ask a sub-question that names
# nothing ("What is the name of the college?"), archived when deft was rerun refusing it.
DEFT_FALLBACK_IN_PLACE = {
    "musique": "musique-deft-e7a59c1",
    "2wikimultihopqa": "2wikimultihopqa-deft-e7a59c1",
    "hotpotqa": "hotpotqa-deft-e7a59c1",
}

# The last deft run of each benchmark whose steps could answer with a name the question
# itself gives, archived when deft was rerun counting such an answer as none.
DEFT_NAMELESS = {
    "musique": "musique-deft-835b49a",
    "2wikimultihopqa": "2wikimultihopqa-deft-835b49a",
    "hotpotqa": "hotpotqa-deft-835b49a",
}

# The last deft run of each benchmark whose writer was asked first after a step that found
# no answer, archived when deft was rerun making the plan first there.
DEFT_ECHOED = {
    "musique": "musique-deft-d09997f",
    "2wikimultihopqa": "2wikimultihopqa-deft-d09997f",
    "hotpotqa": "hotpotqa-deft-d09997f",
}

# The last deft run of each benchmark whose loop went on after two sub-questions found no
# answer, archived when deft was rerun ending it there.
DEFT_REPLANNED = {
    "musique": "musique-deft-bee381c",
    "2wikimultihopqa": "2wikimultihopqa-deft-bee381c",
    "hotpotqa": "hotpotqa-deft-bee381c",
}

# The last deft run of each benchmark at the method's direct-answer threshold of 0.7,
# archived when deft was rerun at 0.5.
DEFT_TAU07 = {
    "musique": "musique-deft-tau07",
    "2wikimultihopqa": "2wikimultihopqa-deft-tau07",
    "hotpotqa": "hotpotqa-deft-tau07",
}

# The last deft run of each benchmark whose LLM_fin answers stood when they named a bridge
# of the chain, archived when deft was rerun with the rule that passed them (issue 34,
# deleted by the rules audit).
DEFT_BRIDGE_KEPT = {
    "musique": "musique-deft-bridge-kept",
    "2wikimultihopqa": "2wikimultihopqa-deft-bridge-kept",
    "hotpotqa": "hotpotqa-deft-bridge-kept",
}
# The last `deft` runs before the fallback read again past an answer repeating the question.
DEFT_ECHO_KEPT = {
    "musique": "musique-deft-echo-kept",
    "2wikimultihopqa": "2wikimultihopqa-deft-echo-kept",
    "hotpotqa": "hotpotqa-deft-echo-kept",
}

# The last `deft` runs before issues 53 and 55 (the hop as a subgraph, comparisons fanned
# out, hostile passages cut at indexing and quoted one to a line, relation chains).
DEFT_BEFORE_55 = {
    "musique": "musique-deft-before-55",
    "2wikimultihopqa": "2wikimultihopqa-deft-before-55",
    "hotpotqa": "hotpotqa-deft-before-55",
}

# The systems of the main table, in its order; any other run folder is a variant under test.
SYSTEMS = ("closed_book", "vanilla", "iterative", "oracle", "chainrag", "deft")

# Issue 52: `deft`'s EM on the validation slice at most this far from its tuning-slice EM.
VALIDATION_GAP = 0.05
# The main table's columns for a system's run on the validation slice, where one exists.
VALIDATION_HEAD = ["validation n", "validation EM", "validation p (EM) vs deft"]

Standing = tuple[str, str, str]  # target (issue), where it stands now, met or not
Section = tuple[str, list[Standing]]


def _header(r: dict[str, Any]) -> str:
    """Where and how a result was measured: the command as run from the repository root,
    environment settings first, then the venv's program."""
    words = r["command"].split()
    env = list(takewhile(lambda w: re.fullmatch(r"[A-Z_]+=\S*", w), words))
    command = " ".join([*env, ".venv/bin/" + " ".join(words[len(env) :])])
    machine_ = r.get("machine") or machine()
    return f"Measured {r['date'][:10]} on {machine_} with `{command}`.\n"


def _met(ok: bool) -> str:
    return "met" if ok else "not met"


def _cell(value: object) -> str:
    """Shares and rates to 3 decimals; counts, seconds and text as they come."""
    if value is None:
        return "-"
    if isinstance(value, float) and abs(value) <= 1:
        return f"{value:.3f}"
    return str(value)


def _p(p: str) -> str:
    """A McNemar p as `hoprag eval compare` prints it, shortened."""
    return p if p in ("", "-") else "< 0.001" if float(p) < 0.001 else f"{float(p):.3f}"


def _p_says(p: str) -> str:
    """`p = 0.125` or `p < 0.001`."""
    return f"p {p}" if p.startswith("<") else f"p = {p}"


def _significant(p: str) -> bool:
    return p.startswith("<") or (p not in ("", "-") and float(p) < 0.05)


def _numeric(cell: str) -> bool:
    return re.fullmatch(r"[<\s\d.x-]*", cell) is not None


def _table(head: list[str], rows: list[list[object]]) -> list[str]:
    """A markdown table; columns of numbers only are aligned right."""
    cells = [[_cell(c) for c in row] for row in rows]
    align = ["---:" if all(_numeric(row[i]) for row in cells) else "---" for i in range(len(head))]
    return [
        "| " + " | ".join(head) + " |",
        "| " + " | ".join(align) + " |",
        *("| " + " | ".join(row) + " |" for row in cells),
    ]


def _targets(standing: list[Standing], after: str = "", title: str = "Targets") -> str:
    """A section's targets as a list, each with where it stands, then `after`."""
    lines = "\n".join(f"- {t}: {now}: **{v}**." for t, now, v in standing)
    return f"{title}:\n\n{lines}" + (f"\n\n{after}" if after else "")


def _section(title: str, *parts: str | list[str]) -> str:
    lines = [f"## {title}", ""]
    for part in parts:
        lines += [*part, ""] if isinstance(part, list) else [part, ""]
    return "\n".join(lines).rstrip() + "\n"


def index_build() -> Section:
    r = load_results("index_build")
    if not r:
        return "", []
    rows = []
    for row in r["rows"]:
        m = json.loads(row["manifest"])
        rows.append(
            [
                row["corpus"],
                m["passages"],
                m["sentences"],
                row["seconds"],
                m["seconds"].get("embed", 0),
                row["peak_rss_gib"],
            ]
        )
    musique = next(row["seconds"] for row in r["rows"] if row["corpus"] == "musique")
    verdict = _met(musique < 300)
    table = _table(["corpus", "passages", "sentences", "wall s", "embed s", "peak RSS GiB"], rows)
    text = _section(
        "Indexing",
        _header(r) + "A full build through `hoprag index`, nothing reused.",
        table,
        f"Target (issue 2): the MuSiQue corpus fully indexed in under 5 minutes: **{verdict}** "
        f"({musique} s).",
    )
    return text, [("MuSiQue indexed in under 5 minutes (issue 2)", f"{musique} s", verdict)]


def sentence_graph() -> Section:
    r, loads = load_results("graph_build"), load_results("graph_load")
    if not r:
        return "", []
    rows = [
        [
            row["corpus"],
            row["sentences"],
            *row["edges"].values(),
            row["seconds_build"]["total"],
            row["seconds"],
            row["peak_rss_gib"],
        ]
        for row in r["rows"]
    ]
    head = ["corpus", "sentences", *(f"{e} edges" for e in r["rows"][0]["edges"])]
    table = _table([*head, "build s", "with start-up s", "peak RSS GiB"], rows)
    build = next(row["seconds_build"]["total"] for row in r["rows"] if row["corpus"] == "musique")
    standing = [
        (
            "Sentence graph adds under 3 minutes to indexing MuSiQue (issue 6)",
            f"{build} s",
            _met(build < 180),
        )
    ]
    lines = [
        f"Target (issue 6): under 3 extra minutes for MuSiQue: **{standing[0][2]}** ({build} s "
        "inside `hoprag index`, models loaded)."
    ]
    if loads:
        worst = max(row["seconds"] for row in loads["rows"])
        standing.append(
            ("The stored graph loads in seconds (issue 6)", f"{worst} s", _met(worst < 10))
        )
        lines.append(
            f"Loading it as every run does (`.venv/bin/{loads['command']}`, {loads['date'][:10]}): "
            + ", ".join(f"{row['corpus']} {row['load_seconds']} s" for row in loads["rows"])
            + f", at most {worst} s with process start-up: **{standing[1][2]}**."
        )
    text = _section(
        "Sentence graph",
        _header(r) + "A complete rebuild of an index's sentence graph by `hoprag graph build`.",
        table,
        " ".join(lines),
    )
    return text, standing


def retrieval_recall() -> Section:
    r = load_results("retrieval_recall")
    if not r:
        return "", []
    ks = (5, 10, 20)
    rows = [
        [bench, group, row["n"], *(row[m][str(k)] for m in ("dense", "bm25", "fused") for k in ks)]
        for bench, groups in r["results"].items()
        for group, row in groups.items()
    ]
    head = [
        "benchmark",
        "group",
        "n",
        *(f"{m}@{k}" for m in ("dense", "bm25", "fused") for k in ks),
    ]
    text = _section(
        "Retrieval: recall of all gold passages",
        _header(r) + f"Split `{r['split']}`; a question counts at k only if *every* gold "
        "passage is in the top k.",
        _table(head, rows),
        "No target (issue 2 asked for the measurement). It bounds what one retrieval of the "
        "whole question can read: MuSiQue's 3- and 4-hop questions need the sub-questions.",
    )
    return text, []


def _run_date(folder: Path) -> str:
    """When a run's results were last written: the date `hoprag eval` keeps in its
    run.json (for runs before that, their last commit's date, filled in when their traces
    left git), else the date of results.jsonl."""
    date = json.loads((folder / "run.json").read_text()).get("date")
    if date:
        return date
    mtime = (folder / "results.jsonl").stat().st_mtime
    return datetime.fromtimestamp(mtime, UTC).date().isoformat()


def _run_commit(folder: Path) -> str:
    """The commit a run's note says it ran on, if it says."""
    note = folder / "note.md"
    found = (
        re.search(r"[Rr]un on commit ([0-9a-f]{7,})", note.read_text()) if note.is_file() else None
    )
    return found.group(1) if found else ""


def _p_em(a: Path, b: Path) -> str:
    """McNemar's exact p on EM over the questions both runs answered (`hoprag eval compare`)."""
    pair = _em_pair(a, b)
    return pair[3] if pair else "-"


def _em_pair(a: Path, b: Path) -> tuple[int, float, float, str] | None:
    """Questions both runs answered, each run's EM on them and McNemar's exact p on EM
    (`hoprag eval compare`); None before they share an answered question."""
    from app.errors import UserError
    from app.eval.report import compare_runs

    try:
        result = compare_runs(a, b)
    except UserError:  # a run just started: no question answered by both yet
        return None
    em = next((r for r in result["rows"] if r["metric"] == "em"), None)
    return (result["shared"], em["a"], em["b"], _p(em["mcnemar_p"])) if em else None


def _runs(bench: str) -> dict[str, Path]:
    """A benchmark's run folders by system, the main table's first, then variants under
    test (`bench.run_systems.VARIANTS`); while `deft` is being rerun, its archived run on
    the old server stands in."""
    from bench.run_systems import VARIANTS

    found = {
        p.name.removeprefix(f"{bench}-"): p
        for p in sorted((RESULTS / "eval").glob(f"{bench}-*"))
        if (p / "results.jsonl").is_file()
    }
    found = {s: p for s, p in found.items() if s in SYSTEMS or s in VARIANTS}  # no --tag runs
    archived = RESULTS / "archive" / DEFT_BEFORE_SERVER.get(bench, "-")
    if "deft" not in found and (archived / "results.jsonl").is_file():
        found["deft"] = archived
    return {s: found[s] for s in SYSTEMS if s in found} | {
        s: p for s, p in found.items() if s not in SYSTEMS
    }


def answering() -> Section:
    deft: dict[str, dict[str, Any]] = {}
    baselines: dict[str, list[tuple[str, float, str]]] = {}  # bench: (system, EM, p)
    old: list[str] = []  # benchmarks whose deft row is the archived run
    parts: list[str | list[str]] = [
        f"First {TUNING_SIZE} dev questions of each benchmark (the tuning slice), made by "
        "`.venv/bin/python -m "
        "bench.run_systems --benchmarks BENCH --systems SYSTEM` (resumable; one `hoprag eval` "
        f"run folder each, `bench/results/eval/BENCH-SYSTEM`) on {machine()}. `oracle` is "
        "the same reader handed only the gold passages; `judged` is scored by the same 1.5B "
        "model, so it is noisy; `coverage` is the share of questions whose whole gold chain "
        "was fed to a reader. `p`: McNemar's exact test on EM against `deft` (`hoprag eval "
        "compare`). Seconds are medians per question; runs that shared the machine (their "
        "`note.md` says so) have inflated ones. `run`: the date in the run's run.json, and "
        "the commit the run's note names."
    ]
    validated: dict[str, dict[str, Path]] = {}  # bench: system: its validation-slice run
    for bench in BENCHMARKS:
        runs = _runs(bench)
        if not runs:
            continue
        summaries = {s: summarise(load_run(p)[1]) for s, p in runs.items()}
        deft_run = runs.get("deft")
        validation = _validation_runs(bench, runs)
        if validation:
            validated[bench] = validation
        rows = []
        for system, folder in runs.items():
            s = summaries[system]["all"]
            p = _p_em(folder, deft_run) if deft_run and folder != deft_run else ""
            if system in ("vanilla", "iterative"):
                baselines.setdefault(bench, []).append((system, s["em"], p))
            rows.append(
                [
                    system if folder.parent.name == "eval" else f"{system} (old server)",
                    s["n"],
                    s["em"],
                    s["f1"],
                    s["judged"],
                    s["coverage"],
                    round(s["words_fed"]),
                    f"{s['llm_calls']:.2f}",
                    round(s["seconds_median"], 1),
                    p,
                    *(_validation_cells(system, validation) if validation else []),
                    ", ".join(filter(None, (_run_date(folder), _run_commit(folder)))),
                ]
            )
        if deft_run:
            deft[bench] = summaries["deft"]
            if deft_run.parent.name != "eval":
                old.append(bench)
        head = ["system", "n", "EM", "F1", "judged", "coverage", "words fed", "LLM calls"]
        head += ["median s", "p (EM) vs deft", *(VALIDATION_HEAD if validation else []), "run"]
        parts += [f"### {bench}", _table(head, rows)]
        hops = sorted(g for g in summaries.get("deft", {}).get("groups", {}) if g.endswith("-hop"))
        if hops:
            groups = summaries["deft"]["groups"]
            by_hop = [[s, *(_hop_cell(summaries[s]["groups"].get(g)) for g in hops)] for s in runs]
            head = [f"{g} (n={groups[g]['n']})" for g in hops]
            parts += ["EM / coverage by hops:", _table(["system", *head], by_hop)]
    if not deft:
        return "", []
    if validated:
        parts.insert(
            1,
            "`validation` columns: the same system on the validation slice (dev questions "
            f"{TUNING_SIZE + 1} and up, never tuned on: `--slice validation`, run folder "
            "`bench/results/eval/BENCH-SYSTEM-validation`): how many questions it answered "
            "there, its EM, and McNemar's p on EM against `deft` on the questions both "
            "answered; `-` where it has not run there.",
        )
    standing = _deft_targets(deft, baselines) + _validation_targets(deft, validated)
    parts.append(_targets(standing, title="Targets for `deft`"))
    if old:
        parts.append(
            f"`deft (old server)` on {', '.join(old)}: its rerun on llama-server is not in "
            "`bench/results/eval/` yet, so the row is its last run on llama-cpp-python's "
            "server (`bench/results/archive/`)."
        )
    return _section("Answering: quality and cost", *parts), standing


def _validation_runs(bench: str, runs: dict[str, Path]) -> dict[str, Path]:
    """The validation-slice run of each system of the table that has one."""
    found = {s: RESULTS / "eval" / run_name(bench, s, "validation") for s in runs}
    return {s: p for s, p in found.items() if (p / "results.jsonl").is_file()}


def _validation_cells(system: str, validation: dict[str, Path]) -> list[object]:
    """A table row's `VALIDATION_HEAD` cells: n, EM and p against `deft`, all on the
    validation slice; `-` where the system has not run there."""
    folder = validation.get(system)
    if folder is None:
        return ["-"] * len(VALIDATION_HEAD)
    s = summarise(load_run(folder)[1])["all"]
    deft_run = validation.get("deft")
    return [s["n"], s["em"], _p_em(folder, deft_run) if deft_run and system != "deft" else ""]


def _validation_targets(
    deft: dict[str, dict[str, Any]], validated: dict[str, dict[str, Path]]
) -> list[Standing]:
    """Issue 52's targets on the validation slice: `deft` near its tuning-slice EM, and
    clearly above `vanilla`, on each benchmark; none before `deft` runs there."""
    runs = {b: v for b, v in validated.items() if b in deft and "deft" in v}
    if not runs:
        return []
    em = {b: summarise(load_run(v["deft"])[1])["all"] for b, v in runs.items()}
    gaps = {b: round(abs(em[b]["em"] - deft[b]["all"]["em"]), 3) for b in runs}
    standing = [
        (
            f"`deft` EM on the validation slice within {VALIDATION_GAP} of its tuning-slice "
            "EM on each benchmark (issue 52)",
            "; ".join(
                f"{b} {em[b]['em']:.3f} (n={em[b]['n']}) vs {deft[b]['all']['em']:.3f}"
                for b in runs
            ),
            _met(len(runs) == len(BENCHMARKS) and max(gaps.values()) <= VALIDATION_GAP),
        )
    ]
    pairs = {b: _em_pair(v["vanilla"], v["deft"]) for b, v in runs.items() if "vanilla" in v}
    pairs = {b: pair for b, pair in pairs.items() if pair}
    if pairs:
        standing.append(
            (
                "`deft` above `vanilla` on the validation slice on each benchmark, McNemar "
                "p < 0.05 on EM (issue 52)",
                "; ".join(
                    f"{b}: {d:.3f} vs {v:.3f} on {n} shared, {_p_says(p)}"
                    for b, (n, v, d, p) in pairs.items()
                ),
                _met(
                    len(pairs) == len(BENCHMARKS)
                    and all(d > v and _significant(p) for _, v, d, p in pairs.values())
                ),
            )
        )
    return standing


def _hop_cell(block: dict[str, Any] | None) -> str:
    return f"{block['em']:.3f} / {block['coverage']:.3f}" if block else "-"


def _deft_targets(
    deft: dict[str, dict[str, Any]], baselines: dict[str, list[tuple[str, float, str]]]
) -> list[Standing]:
    """Issue 34's targets for `deft`, and issue 4's lead over the baselines."""
    standing = []
    if "musique" in deft:
        m, hops = deft["musique"]["all"], deft["musique"]["groups"]
        standing += [
            (
                "MuSiQue `deft` EM at least 0.25 and F1 at least 30 of 100 (issue 34)",
                f"EM {m['em']:.3f}, F1 {100 * m['f1']:.1f}",
                _met(m["em"] >= 0.25 and m["f1"] >= 0.30),
            ),
            (
                "Chain coverage of MuSiQue 3- and 4-hop questions beside EM (issue 34)",
                ", ".join(
                    f"{g} {hops[g]['coverage']:.3f}" for g in ("3-hop", "4-hop") if g in hops
                ),
                "reported",
            ),
        ]
    words = mean(d["all"]["words_fed"] for d in deft.values())
    calls = mean(d["all"]["llm_calls"] for d in deft.values())
    of = "the three" if len(deft) == len(BENCHMARKS) else " and ".join(deft)
    standing.append(
        (
            "Words fed at most 390 and LLM calls at most 5.5 per question, mean over the "
            "three benchmarks (issue 34; issue 4 asked 4.8 calls)",
            f"{words:.0f} words, {calls:.2f} calls (mean of {of})",
            _met(words <= 390 and calls <= 5.5),
        )
    )
    leads = {
        b: all(_significant(p) and em < deft[b]["all"]["em"] for _, em, p in rows)
        for b, rows in baselines.items()
        if b in deft and b in ("musique", "2wikimultihopqa")
    }
    if leads:
        now = "; ".join(
            f"{b}: " + ", ".join(f"{s} {_p_says(p)}" for s, _, p in baselines[b]) for b in leads
        )
        standing.append(
            (
                "`deft` clearly above `vanilla` and `iterative` on MuSiQue and 2Wiki, McNemar "
                "on EM (issue 4)",
                now,
                _met(len(leads) == 2 and all(leads.values())),
            )
        )
    return standing


def deft_errors() -> Section:
    """Where wrong answers lost the gold answer: the baseline for issue 34's second lever."""
    r = load_results("deft_errors")
    if not r:
        return "", []
    current = {f"{b}-{s}" for b in BENCHMARKS for s in SYSTEMS} | set(DEFT_DM_ORDER.values())
    stages = list(r["rows"][0]["lost_at"])
    breaks = list(r["rows"][0]["chain_breaks"])
    rows = [
        [row["run"], row["wrong"], *row["lost_at"].values(), row["table_endings_stopped_short"]]
        for row in r["rows"]
        if row["run"] in current
    ]
    chains = [
        [row["run"], row["lost_at"]["never_read"], *row["chain_breaks"].values()]
        for row in r["rows"]
        if row["run"] in current and "-deft" in row["run"]
    ]
    text = _section(
        "Where wrong answers lost the gold answer",
        _header(r) + "Read from the runs' traces (`traces.jsonl.gz` beside each run, not in "
        "git) by `bench/deft_errors.py` (its docstring "
        "defines the stages): each wrong answer at the first stage where the gold answer went "
        "missing. `never_read`: nothing a reader read holds it (the sentences read, where a "
        "passage was read in part); `read_not_taken`: something did and the reader answered "
        "otherwise; `stopped short`: a QA-table answer with "
        "fewer rows than gold passages.",
        _table(["run", "wrong", *(f"`{s}`" for s in stages), "stopped short"], rows),
        "Where the chain broke for the `deft` questions that never read their answer (first "
        "that applies): `retrieved_not_read`, a gold passage never read was retrieved and "
        "the relevance filter dropped it or chose none of its sentences; "
        "`named_not_retrieved`, a sub-question or answer names it and no search found it; "
        "`first_hop_missed`, no gold passage read; "
        "`bridge_not_found`, a gold passage read and the next never named (a wrong bridge "
        "answer or a drifting sub-question).",
        _table(["run", "`never_read`", *(f"`{b}`" for b in breaks)], chains),
        "No target of its own: issue 34 asks to find where the chain breaks for the "
        "`never_read` questions and fix the biggest cause. Runs named with a commit are "
        "archived `deft` runs whose steps chose what to read by DM_rel alone; they record "
        "only which passages were read, so a passage read in part counts as read whole and "
        "their `never_read` is a lower bound.",
    )
    return text, []


def reachable() -> Section:
    """How many questions any configuration measured so far answered: what issue 34's
    MuSiQue target asks of the method's search space."""
    r = load_results("reachable")
    if not r:
        return "", []
    rows = [
        [
            row["benchmark"],
            row["runs"],
            row["right_now"],
            row["right_in_some_run"],
            row["right_in_half"],
        ]
        for row in r["rows"]
    ]
    missing = [
        f"- {row['benchmark']}: {item['question']} ({', '.join(item['runs'])})"
        for row in r["rows"]
        for item in row["reached_not_now"]
    ]
    text = _section(
        "How far the configurations tried reach",
        _header(r) + "Every committed `deft` run of the first 60 dev questions: the current "
        "one and each other configuration kept (a lever tried, a study, an older default). "
        "Right now: the current run's EM count; right in some run: the questions any "
        "configuration answered right, which a per-question choice of configuration would "
        "reach and no single one has; right in half: those right in at least half of the "
        "runs.",
        _table(["benchmark", "runs", "right now", "right in some run", "right in half"], rows),
        "The questions some run answered and the current one does not, with those runs:",
        "\n".join(missing),
        "No target of its own: it says how far the MuSiQue EM target of issue 34 (15 of 60) "
        "lies from what the method's configurations have reached with the embedded model.",
    )
    return text, []


def decision_model() -> Section:
    """The trained DM on dev against issue 5's targets, its latency and its training."""
    if not DM_EVAL_REPORT.is_file():
        return "", []
    r = json.loads(DM_EVAL_REPORT.read_text())
    targets = {"rel": 0.95, "direct": 0.90, "suff": 0.90, "same": 0.95}
    rows, missed = [], []
    for kind in ("rel", "direct", "depth", "suff", "same"):
        t, paired, zero = r[kind]["trained"], r[kind]["trained_paired"], r[kind]["zero_shot"]
        ok = t["auc"] >= targets.get(kind, 0) and t["ece"] <= 0.05
        missed += [] if ok else [kind]
        rows.append(
            [
                kind,
                t["n"],
                t["auc"],
                t["ece"],
                targets.get(kind, "-"),
                _met(ok),
                f"{zero['backend']}: {zero['auc']:.3f} against {paired['auc']:.3f} (n={zero['n']})",
            ]
        )
    by_query = r["rel"].get("by_query", {})
    commands = r["command"] if isinstance(r["command"], list) else [r["command"]]
    parts: list[str | list[str]] = [
        f"Measured {r['date'][:10]}{'' if len(commands) == 1 else ' (the last command)'} "
        f"on {machine()} with "
        + ", then ".join(f"`.venv/bin/{c}`" for c in commands)
        + ": the trained DM as served (int8 ONNX) on a seeded sample "
        "of at most 1,500 dev examples per kind; the zero-shot backend on a few dozen of "
        "them, against the trained DM on the same ones.",
        _table(
            ["kind", "n", "AUC", "ECE", "AUC target", "met", "zero-shot AUC against trained"], rows
        ),
        "Targets (issue 5): AUC as listed and ECE at most 0.05 per kind: **"
        + (f"not met for {', '.join(missed)}" if missed else "met")
        + f"**. The trained DM serves {', '.join(r.get('use_for', []))}."
        + (
            " `rel` by query: "
            + ", ".join(f"{q} {v['trained']['auc']:.3f}" for q, v in by_query.items())
            + "."
            if by_query
            else ""
        ),
        " ".join(
            f"![{kind}](dm_eval/reliability_{kind}.png)"
            for kind in targets | {"depth": 0}
            if (DM_EVAL_REPORT.parent / f"reliability_{kind}.png").is_file()
        ),
    ]
    standing = [
        (
            "DM AUC targets and ECE at most 0.05 per kind (issue 5)",
            f"{len(rows) - len(missed)} of {len(rows)} kinds",
            _met(not missed),
        )
    ]
    latency = load_results("dm_latency")
    if latency:
        verdict = _met(latency["median_ms"] < 150)
        parts.append(
            _header(latency) + f"Relevance of {latency['passages']} passages in one call, "
            f"alone on the machine: median {latency['median_ms']} ms, p90 {latency['p90_ms']} "
            f"ms. Target (issue 5): under 150 ms: **{verdict}**."
        )
        standing.append(
            (
                "DM relevance of 10 passages under 150 ms (issue 5)",
                f"{latency['median_ms']} ms",
                verdict,
            )
        )
    text, scratch = _dm_from_scratch()
    return _section("Decision model", *parts, *text), standing + scratch


def _dm_from_scratch() -> tuple[list[str], list[Standing]]:
    """`hoprag dm data` + `hoprag dm train` timed, and the DM they made on dev."""
    r, ev = load_results("dm_train"), load_results("dm_train_eval")
    if not r:
        return [], []
    minutes = (r["data_seconds"] + r["train_seconds"]) / 60
    lines = [
        "### Training from scratch on this machine",
        _header(r) + f"`hoprag dm data` {r['data_seconds']} s, `hoprag dm train` "
        f"{r['train_seconds']} s on {r['device']} (peak {r['train_peak_rss_gib']} GiB): "
        f"{minutes:.1f} minutes. Target (issue 5): one command, at most 60 minutes: "
        f"**{_met(minutes <= 60)}**.",
    ]
    standing = [
        (
            "DM trained from scratch in at most 60 minutes (issue 5)",
            f"{minutes:.1f} min",
            _met(minutes <= 60),
        )
    ]
    if ev:
        kinds = ("rel", "direct", "depth", "suff", "same")
        shipped = ev.get("shipped") or json.loads(DM_EVAL_REPORT.read_text())
        rows = [
            [
                k,
                ev[k]["trained"]["n"],
                shipped[k]["trained"]["auc"],
                shipped[k]["trained"]["ece"],
                ev[k]["trained"]["auc"],
                ev[k]["trained"]["ece"],
            ]
            for k in kinds
        ]
        over = [k for k in kinds if ev[k]["trained"]["ece"] > 0.05]
        lines += [
            f"The DM it made against the shipped one on the same dev sample (`.venv/bin/"
            f"{ev['command']}`, {ev['date'][:10]}; depth then served by the adapter alone):",
            "\n".join(
                _table(
                    ["kind", "n", "shipped AUC", "shipped ECE", "scratch AUC", "scratch ECE"], rows
                )
            ),
            "ECE at most 0.05 from scratch: **"
            + (f"not met for {', '.join(over)}" if over else "met")
            + "**.",
        ]
        standing.append(
            (
                "DM trained from scratch meets ECE at most 0.05 (issue 5)",
                ", ".join(f"{k} {ev[k]['trained']['ece']:.3f}" for k in over) or "all",
                _met(not over),
            )
        )
    return lines, standing


def serving() -> Section:
    """Embedded server options replayed on recorded DeFT traffic (bench.serving)."""
    r = load_results("serving")
    if not r:
        return "", []
    rows = []
    for row in r["rows"]:
        cells: list[object] = [row["config"]]
        for mode in ("sequential", "concurrent"):
            m = row.get(mode)
            cells += [m["seconds"], m["prompt_reuse"], m["replies_changed"]] if m else ["-"] * 3
        rows.append(cells)
    head = ["option", "one chat s", "reused", "changed", "concurrent s", "reused", "changed"]
    text = _section(
        "Embedded server options",
        _header(r) + f"The {r['calls']} chat calls `deft` made on {r['questions']} MuSiQue dev "
        "questions, replayed on a fresh server per option, one question after another (one "
        "chat) and, for slot counts, all at once. `reused`: share of prompt tokens served "
        "from the slots' cache; `changed`: replies that differ from the first row's.",
        _table(head, rows),
        "Issue 33 asks to measure the options and keep what wins. " + r.get("notes", ""),
    )
    return text, [("Server options measured, the fastest kept (issue 33)", "eight slots", "done")]


def engine_speed() -> Section:
    """The engine's flag sets against the old `-march=native` build (issue 50)."""
    r = load_results("engine_speed")
    if not r:
        return "", []
    rows = [
        [
            row["engine"],
            row["flag_set"],
            row["prompt_tokens"],
            row["prompt_tps"],
            row["gen_tps"],
            row["ask_s"],
            row["llm_s"],
            ", ".join(row["answers"]),
        ]
        for row in r["rows"]
    ]
    head = ["engine", "flag set", "prompt tokens", "prompt tok/s", "gen tok/s", "ask s", "chat s"]
    head.append("answers")
    by_name = {row["engine"]: row for row in r["rows"]}
    standing: list[Standing] = []
    if "native" in by_name and "installed" in by_name:
        old, new = by_name["native"], by_name["installed"]
        ratios = {
            "prompt": new["prompt_tps"] / old["prompt_tps"],
            "generation": new["gen_tps"] / old["gen_tps"],
            "sample question": old["ask_s"] / new["ask_s"],  # above 1 is faster, as for rates
        }
        worst = min(ratios.values())
        now = ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()) + " the native speed"
        standing.append(("Default engine within 10% of the native build (issue 50)", now,
                         _met(worst >= 0.9)))  # fmt: skip
    text = _section(
        "Embedded engine builds",
        _header(r) + "`native`: the build every CPU got before issue 50 (`-march=native`); "
        "`installed`: the engine `hoprag llm build` installs now, its instruction sets "
        "chosen from the CPU's flags with AMX off. Each engine is started fresh, reads one "
        "uncached prompt of the sample's passages and writes 64 tokens; `ask s` is the wall "
        "time of `hoprag ask` on the sample question (server start and model load included, "
        "QA cache off), `chat s` the part of it spent in chat calls. Medians of the "
        "repeats, the engines taking turns.",
        _table(head, rows),
        *_fallback_speed(by_name),
    )
    return text, standing


def _fallback_speed(by_name: dict[str, dict[str, Any]]) -> list[str]:
    """What a fall-back flag set costs against the installed build, where both were run."""
    if "installed" not in by_name:
        return []
    best = by_name["installed"]
    return [
        f"`{name}`, a fall-back `hoprag llm build` takes when the better sets die in their "
        f"smoke run, reads prompts at {row['prompt_tps'] / best['prompt_tps']:.2f}x and writes "
        f"at {row['gen_tps'] / best['gen_tps']:.2f}x the installed build's speed."
        for name, row in by_name.items()
        if name in ("avx2", "x86-64")
    ]


# How far a document version's EM may fall below the passage-level run (issue 51).
DOCUMENT_EM_SLACK = {"md": 0.03, "html": 0.05, "pdf": 0.05}


def documents() -> Section:
    """`deft` on the benchmark corpora written as documents against the passage-level
    corpus (bench.documents), and the PDF version's indexing speed."""
    from app.eval.report import compare_runs

    rows, standing = [], []
    for bench in BENCHMARKS:
        base = RESULTS / "eval" / f"{bench}-deft"
        for fmt in ("md", "html", "pdf", "txt"):
            run = RESULTS / "eval" / f"{bench}-documents-{fmt}"
            if not (run / "results.jsonl").is_file() or not (base / "results.jsonl").is_file():
                continue
            result = compare_runs(base, run)
            em = {r["metric"]: r for r in result["rows"]}["em"]
            new = summarise(load_run(run)[1])["all"]
            split = json.loads((run / "run.json").read_text()).get("documents")
            rows.append(
                [
                    bench,
                    fmt,
                    f"{split['passages']:,}: {split['splitting']}" if split else "cut at 120 words",
                    result["shared"],
                    f"{em['a']:.3f} / {em['b']:.3f}",
                    _p(em["mcnemar_p"]),
                    f"{new['f1']:.3f}",
                    f"{new['words_fed']:.0f}",
                ]
            )
            if fmt in DOCUMENT_EM_SLACK:
                ok = result["shared"] >= 60 and em["b"] >= em["a"] - DOCUMENT_EM_SLACK[fmt]
                standing.append(
                    (
                        f"{bench} as {fmt} documents: EM within {DOCUMENT_EM_SLACK[fmt]} of the "
                        "passages (issue 51)",
                        f"{em['b']:.3f} against {em['a']:.3f} ({result['shared']} questions)",
                        _met(ok),
                    )
                )
    speed = load_results("documents_index")
    pdf_rows = [r for r in (speed or {}).get("rows", []) if r.get("pages")]
    if not rows and not pdf_rows and not load_results("documents_memory"):
        return "", []
    parts: list[str | list[str]] = [
        "Each corpus written as files of 20 passages in corpus order, every passage a "
        "section under its title (a bookmarked heading in PDF; no headings in `txt`), "
        "indexed through `hoprag index` on the folder, and `deft` on the first 60 dev "
        "questions, whose gold passages are the passages cut from the gold text: "
        "`.venv/bin/python -m bench.documents --benchmarks BENCHMARK --formats FORMAT`. "
        "EM: passage-level corpus / documents (`hoprag eval compare`). `passages`: how "
        "the run's documents were split (runs without a count cut every section at 120 "
        "words, the rule before even pieces)."
    ]
    if rows:
        head = ["benchmark", "format", "passages", "shared", "EM", "p (EM)", "F1", "words fed"]
        parts.append(_table(head, rows))
    if pdf_rows:
        parts.append(_header(speed) + "Indexing the PDF versions, wall time of `hoprag index`:")
        parts.append(
            _table(
                ["index", "files", "pages", "passages", "s", "pages/min"],
                [
                    [
                        r["index"],
                        r["files"],
                        r["pages"],
                        r["passages"],
                        r["seconds"],
                        r["pages_per_minute"],
                    ]
                    for r in pdf_rows
                ],
            )
        )
        fastest = max(r["pages_per_minute"] for r in pdf_rows)
        standing.append(
            (
                "1,000 PDF pages indexed in under 5 minutes (issue 51)",
                f"{fastest} pages/min",
                _met(fastest >= 200),
            )
        )
    memory = load_results("documents_memory")
    if memory:
        parts.append(
            _header(memory) + "Peak memory of `hoprag index` on the same PDF pages, with "
            "incompressible figures (about 200 MB) and without:"
        )
        head = ["folder", "files", "MB", "passages", "s", "peak RSS GiB"]
        keys = ["folder", "files", "megabytes", "passages", "seconds", "peak_rss_gib"]
        parts.append(_table(head, [[r[k] for k in keys] for r in memory["rows"]]))
    return _section("Your documents: benchmark corpora as files", *parts), standing


# Issue 55: `deft`'s attack success after the defences, on every benchmark, under this.
ATTACK_SUCCESS_TARGET = 0.05


def injection() -> Section:
    """Hostile passages (bench.injection): how often an attack turns the answer or reaches
    the QA cache, by tag (before and after the defences), and `deft`'s EM with passages
    quoted as data against the main run."""
    r = load_results("injection")
    if not r:
        return "", []
    from bench.injection import ATTACKS

    rows = sorted(r["rows"], key=lambda x: (x["tag"] != "undefended", x["benchmark"], x["system"]))
    table = [
        [
            x["benchmark"],
            x["system"],
            x["tag"],
            x["questions"],
            x["attack_success"],
            x.get("held_out_success"),
            *(x["by_attack"].get(a, 0) for a in ATTACKS),
            x["em"],
            x.get("poisoned_rows", "-"),
            x.get("poisoned_questions"),
        ]
        for x in rows
    ]
    head = ["benchmark", "system", "tag", "n", "attack success", "held-out success", *ATTACKS, "EM"]
    parts: list[str | list[str]] = [
        _header(r) + "One hostile passage added per question (its first gold title, the "
        "question, and an attack for a made-up answer X, the four forms in turn), `hoprag "
        "eval` on the first 60 dev questions. `attack success`: the share of answers that "
        "became X under the three forms issue 55 names; `held-out success`: the same under the "
        "fourth, which no defence was written for; then the count per form; EM on the "
        "attacked index; `poisoned`: QA-cache entries whose answer holds an X, and the "
        "share of questions whose X reached the cache. `undefended`: before the defences "
        'of docs/guide.md\'s "Hostile passages"; `defended`: with them; `header`: with '
        "them and a header calling the passages data, not orders (not kept: "
        'docs/decisions.md, "Telling the model that passages are data").',
        _table([*head, "poisoned", "poisoned questions"], table),
    ]
    defended = {x["benchmark"]: x for x in rows if x["system"] == "deft" and x["tag"] == "defended"}
    standing: list[Standing] = [
        (
            f"`deft` attack success under {ATTACK_SUCCESS_TARGET:.0%} on every benchmark "
            "(issue 55)",
            ", ".join(f"{b} {x['attack_success']:.3f}" for b, x in defended.items()) or "no run",
            _met(
                set(defended) == set(BENCHMARKS)
                and all(x["attack_success"] < ATTACK_SUCCESS_TARGET for x in defended.values())
            ),
        )
    ]
    return _section("Hostile passages", *parts), standing


def rules_audit() -> Section:
    """The rules audit (bench.rules_audit, issue 52): the lean graph against the default on
    the validation slice, then each rule family off where it fired."""
    r = load_results("rules_audit")
    if not r:
        return "", []
    slices, families = [], []
    for bench, x in r["benchmarks"].items():
        s = x["slice"]
        slices.append(
            [
                bench,
                s["questions"],
                s["em_with"],
                s["em_without"],
                s["right_only_with"],
                s["right_only_without"],
                _p(str(s["p"])),
                f"{s['calls_with']:.2f}",
                f"{s['calls_without']:.2f}",
            ]
        )
        families += [
            [
                bench,
                f,
                v["questions"],
                v["right_only_with"],
                v["right_only_without"],
                _p(str(v["p"])) if v["questions"] else "-",
                f"{v['calls_with']:.2f}",
                f"{v['calls_without']:.2f}",
            ]
            for f, v in x["families"].items()
        ]
    parts: list[str | list[str]] = [
        _header(r) + "The validation slice with every rule family (the default) and with "
        "none (`deft-lean`, `HOPRAG_RULES_OFF=all`): EM, the questions only one of them "
        "answers, McNemar's p, LLM calls per question.",
        _table(
            [
                "benchmark",
                "n",
                "EM default",
                "EM lean",
                "default only",
                "lean only",
                "p",
                "calls default",
                "calls lean",
            ],
            slices,
        ),
        "Each family off alone (`HOPRAG_RULES_OFF=FAMILY`), on the questions the default and "
        "the lean graph answer differently where its trace shows the family at work, both "
        "from a cold QA cache: the questions only the default answers (`with`), only the "
        "run without it (`without`), and the calls of each.",
        _table(
            [
                "benchmark",
                "family",
                "n",
                "right only with",
                "right only without",
                "p",
                "calls with",
                "calls without",
            ],
            families,
        ),
    ]
    return _section("The rules audit (issue 52)", *parts), []


def comparisons() -> Section:
    """Comparisons in parallel (bench.comparisons): `deft` with a comparison's steps fanned
    out against the same steps one at a time, in one session."""
    r = load_results("comparisons")
    if not r:
        return "", []
    from bench.comparisons import SPEEDUP_TARGET

    rows = [x for x in r["rows"] if not x["tag"] and x.get("shared")]
    table = []
    for x in rows:
        # The benchmark's questions, then each question type where the data give one.
        parts_of = [("all", x["serial"], x["fanout"])] + [
            (group, x["serial"]["groups"][group], x["fanout"]["groups"][group])
            for group in x["serial"].get("groups", {})
        ]
        for group, serial, fanout in parts_of:
            for mode, m in (("serial", serial), ("fanout", fanout)):
                change = fanout["median_s"] / serial["median_s"] - 1 if mode == "fanout" else None
                p = f"{x['mcnemar_p']}" if mode == "fanout" and group == "all" else ""
                table.append(
                    [x["benchmark"], group, mode, m["questions"], m["em"], m["llm_calls"],
                     m["median_s"], m["p90_s"], f"{change:+.1%}" if change is not None else "",
                     _p(p)]
                )  # fmt: skip
    parts: list[str | list[str]] = [
        _header(r) + "`deft` on every comparison and bridge_comparison question of "
        "2WikiMultihopQA's dev split and on HotpotQA's dev questions that compare named "
        "options (the option parser's, as the copy here has no question type), with "
        "`HOPRAG_FAN_OUT_COMPARISONS` on (`fanout`: one step per option at once, in parallel "
        "branches) and off (`serial`: one step at a time), each from a cold QA cache. "
        "`calls`: LLM calls per question; seconds per question; `p (EM)`: McNemar's exact "
        "test against `serial`.",
        _table(
            [
                "benchmark",
                "questions",
                "mode",
                "n",
                "EM",
                "calls",
                "median s",
                "p90 s",
                "median",
                "p (EM)",
            ],
            table,
        ),
    ]
    met = bool(rows) and all(
        -x["median_change"] >= SPEEDUP_TARGET
        and (x["fanout"]["em"] >= x["serial"]["em"] or not _significant(_p(f"{x['mcnemar_p']}")))
        for x in rows
    )
    now = ", ".join(
        f"{x['benchmark']} {x['median_change']:+.1%}, EM {x['serial']['em']:.3f} / "
        f"{x['fanout']['em']:.3f} ({_p_says(_p(str(x['mcnemar_p'])))})"
        for x in rows
    )
    standing: list[Standing] = [
        (
            f"comparison median seconds down ≥{SPEEDUP_TARGET:.0%}, EM not lower (issue 53)",
            now or "no run",
            _met(met),
        )
    ]
    return _section("Comparisons in parallel", *parts), standing


def _against_archive(
    archived: dict[str, str], later: dict[str, str] | None = None
) -> tuple[list[tuple[str, int, dict[str, Any], dict[str, Any], dict[str, Any]]], list[str]]:
    """Each benchmark's current `deft` run (or the `later` archived one) against its
    `archived` one: (benchmark, questions both answered, old summary, new summary, the EM
    row of `hoprag eval compare`), and the benchmarks not rerun yet."""
    from app.eval.report import compare_runs

    pairs, pending = [], []
    for bench, name in archived.items():
        before = RESULTS / "archive" / name
        after = RESULTS / "archive" / later[bench] if later else RESULTS / "eval" / f"{bench}-deft"
        if not (before / "results.jsonl").is_file() or not (after / "results.jsonl").is_file():
            pending.append(bench)
            continue
        result = compare_runs(before, after)
        em = {r["metric"]: r for r in result["rows"]}["em"]
        old, new = summarise(load_run(before)[1])["all"], summarise(load_run(after)[1])["all"]
        pairs.append((bench, result["shared"], old, new, em))
    return pairs, pending


def _lever(
    title: str, intro: str, archived: dict[str, str], later: dict[str, str] | None, target: str
) -> Section:
    """An issue 34 lever: deft with it against deft without, same graph otherwise; the
    target is words fed at most 390 on every benchmark and EM not lower anywhere."""
    pairs, pending = _against_archive(archived, later)
    if not pairs:
        return "", []
    rows = [
        [
            bench,
            shared,
            f"{em['a']:.3f} / {em['b']:.3f}",
            _p(em["mcnemar_p"]),
            f"{old['f1']:.3f} / {new['f1']:.3f}",
            f"{old['words_fed']:.0f} / {new['words_fed']:.0f}",
            f"{old['llm_calls']:.2f} / {new['llm_calls']:.2f}",
            f"{old['seconds_median']:.1f} / {new['seconds_median']:.1f}",
        ]
        for bench, shared, old, new, em in pairs
    ]
    standing = [
        (
            target,
            "; ".join(
                f"{bench} {new['words_fed']:.0f} words, EM {em['a']:.3f} / {em['b']:.3f}"
                for bench, _, _, new, em in pairs
            ),
            _met(
                not pending
                and all(new["words_fed"] <= 390 and em["b"] >= em["a"] for *_, new, em in pairs)
            ),
        )
    ]
    text = _section(
        title,
        f"{intro} First 60 dev questions, `.venv/bin/python -m bench.run_systems --systems "
        "deft`; EM test: `hoprag eval compare ARCHIVED NEW`. Before / after in every cell.",
        _table(
            ["benchmark", "shared", "EM", "p (EM)", "F1", "words fed", "LLM calls", "median s"],
            rows,
        ),
        _targets(standing, f"Not rerun yet: {', '.join(pending)}." if pending else ""),
    )
    return text, standing


def sentence_reading() -> Section:
    """Issue 34's first lever: deft reading sentences against its last run reading passages."""
    return _lever(
        "Reading sentences (issue 34)",
        "The first `deft` runs that read the kept passages' best sentences (`read_words`, "
        "`final_read_words`; `DEFT_DM_ORDER` in `bench/render.py`), against the last runs "
        "that read the passages whole, with the same graph otherwise (`DEFT_PASSAGE_READING`), "
        "both under `bench/results/archive/`.",
        DEFT_PASSAGE_READING,
        DEFT_DM_ORDER,
        "Reading sentences: words fed at most 390 on every benchmark, EM not lower anywhere "
        "(issue 34)",
    )


def step_fusion() -> Section:
    """Issue 34's second lever: steps choosing what to read by DM_rel fused with retrieval
    rank, against DM_rel alone."""
    return _lever(
        "Which passages a step reads (issue 34)",
        "The first `deft` runs whose steps chose passages and sentences by DM_rel fused "
        "with retrieval rank (`STEP_FUSION_K`; `DEFT_FUSED` in `bench/render.py`), against "
        "the last runs that chose by DM_rel alone (`DEFT_DM_ORDER`), both under "
        "`bench/results/archive/`. The replay that chose it: docs/decisions.md.",
        DEFT_DM_ORDER,
        DEFT_FUSED,
        "Fused step reads: words fed at most 390 on every benchmark, EM not lower anywhere "
        "(issue 34)",
    )


def deep_questions() -> Section:
    """Issue 34: a question judged deeper than 2 hops needs three QA-table rows."""
    return _lever(
        "Deep questions stopping short (issue 34)",
        "The `deft` runs of the answering tables, whose sufficiency check needs "
        "`DEEP_MIN_ROWS` rows for a question DM_depth judged deeper than 2 hops, against the "
        "last runs without that rule (`DEFT_FUSED` in `bench/render.py`, under "
        "`bench/results/archive/`).",
        DEFT_FUSED,
        DEFT_DEEP,
        "Deep questions need three rows: words fed at most 390 on every benchmark, EM not "
        "lower anywhere (issue 34)",
    )


def planned_steps() -> Section:
    """Issue 34: a refused sub-question takes the plan's next step before a told-why retry,
    and a one-hop question is asked as it is."""
    return _lever(
        "A refused sub-question takes the plan's next step (issue 34)",
        "The first `deft` runs whose writer, its sub-question refused, takes the "
        "decomposition's next step before it is asked again, and whose one-hop questions "
        "are asked as they are (`DEFT_REFUSED`), against the last runs that asked the writer again "
        "first (`DEFT_DEEP` in `bench/render.py`, under `bench/results/archive/`).",
        DEFT_DEEP,
        DEFT_REFUSED,
        "Planned step before a retry: words fed at most 390 on every benchmark, EM not lower "
        "anywhere (issue 34)",
    )


def kept_plan() -> Section:
    """Issue 34: once a decomposition is made, its steps come before the writer."""
    return _lever(
        "A kept plan's steps before the writer (issue 34)",
        "The first `deft` runs which, once a refused sub-question has made the "
        "decomposition, ask its next askable step before calling the writer "
        "(`DEFT_KEPT_PLAN`), against the last runs that called the writer at every step "
        "(`DEFT_REFUSED` in `bench/render.py`, under `bench/results/archive/`). The same "
        "runs repeated with identical answers and tokens took up to 16% longer on another "
        "day: seconds measure the machine as much as the graph.",
        DEFT_REFUSED,
        DEFT_KEPT_PLAN,
        "Kept plan before the writer: words fed at most 390 on every benchmark, EM not lower "
        "anywhere (issue 34)",
    )


def unknown_answers() -> Section:
    """Issue 34: an unknown answer no longer walks the sentence graph for a second read."""
    return _lever(
        "An unknown answer is not read again (issue 34)",
        "The first `deft` runs whose steps walk the sentence graph only when no retrieved "
        "passage passes the relevance threshold (the method's rule; `DEFT_NO_SECOND_READ` "
        "in `bench/render.py`), against the last runs that also walked it, and read again, "
        "after an unknown answer (`DEFT_KEPT_PLAN`), both under `bench/results/archive/`.",
        DEFT_KEPT_PLAN,
        DEFT_NO_SECOND_READ,
        "No second read after an unknown answer: words fed at most 390 on every benchmark, "
        "EM not lower anywhere (issue 34)",
    )


def fallback_in_place() -> Section:
    """Issue 34: the fallback reads the question with the table's answers in place, and a
    choice question's answer is one of its options."""
    return _lever(
        "The fallback reads the question with its answers in place (issue 34)",
        "The first `deft` runs whose fallback searches, judges and reads the question with "
        "the descriptions the QA table resolved put in place, whose choice questions "
        "answered with neither option get the option whose rows reached that answer, and "
        'whose guard also rewrites "this area" and "these two" (`DEFT_FALLBACK_IN_PLACE` in '
        "`bench/render.py`), against the last runs without (`DEFT_NO_SECOND_READ`), both "
        "under `bench/results/archive/`.",
        DEFT_NO_SECOND_READ,
        DEFT_FALLBACK_IN_PLACE,
        "Fallback with answers in place: words fed at most 390 on every benchmark, EM not "
        "lower anywhere (issue 34)",
    )


def nameless_steps() -> Section:
    """Issue 34: a sub-question that names nothing is refused."""
    return _lever(
        "Sub-questions that name nothing are refused (issue 34)",
        "The first `deft` runs whose writer and plan may not ask a "
        'sub-question that names nothing in fewer than three content words ("What is the '
        'name of the college?"; `tools/question_rules.py: too_vague`; `DEFT_NAMELESS` in '
        "`bench/render.py`), against the last runs that could (`DEFT_FALLBACK_IN_PLACE`), "
        "both under `bench/results/archive/`.",
        DEFT_FALLBACK_IN_PLACE,
        DEFT_NAMELESS,
        "Nameless sub-questions refused: words fed at most 390 on every benchmark, EM not "
        "lower anywhere (issue 34)",
    )


def echoed_answers() -> Section:
    """Issue 34: a step's answer that repeats a name the question gives is no answer."""
    return _lever(
        "Answers the question already gives are no answers (issue 34)",
        "The first `deft` runs whose rule update counts a step's answer "
        "that only repeats a name from the question as none (`nodes/qa_table.py`; "
        "`DEFT_ECHOED` in `bench/render.py`), against the last runs that took it as a row "
        "(`DEFT_NAMELESS`), both under `bench/results/archive/`.",
        DEFT_NAMELESS,
        DEFT_ECHOED,
        "Echoed answers dropped: words fed at most 390 on every benchmark, EM not lower "
        "anywhere (issue 34)",
    )


def replanned_steps() -> Section:
    """Issue 34: after a step that found no answer the plan comes before the writer."""
    return _lever(
        "After a step found no answer, the plan first (issue 34)",
        "The first `deft` runs whose next sub-question after a step that found no answer is "
        "the decomposition's next askable step, made then if not yet "
        "(`nodes/sub_question.py: found_no_answer`; `DEFT_REPLANNED` in `bench/render.py`), "
        "against the last runs that asked the writer first there (`DEFT_ECHOED`), both "
        "under `bench/results/archive/`.",
        DEFT_ECHOED,
        DEFT_REPLANNED,
        "Plan first after no answer: words fed at most 390 on every benchmark, EM not "
        "lower anywhere (issue 34)",
    )


def dead_ends() -> Section:
    """Issue 34: two sub-questions without an answer end the loop."""
    return _lever(
        "Two sub-questions without an answer end the loop (issue 34)",
        "The first `deft` runs whose loop hands over to the fallback once two sub-questions "
        "found no answer (`nodes/sufficiency.py: loop_end`; `DEFT_TAU07` in "
        "`bench/render.py`), against the last runs that went on to the step limit "
        "(`DEFT_REPLANNED`), both under `bench/results/archive/`.",
        DEFT_REPLANNED,
        DEFT_TAU07,
        "Loop ended after two dead ends: words fed at most 390 on every benchmark, EM not "
        "lower anywhere (issue 34)",
    )


def direct_threshold() -> Section:
    """Issue 34: the direct-answer threshold lowered from the method's 0.7 to 0.5."""
    return _lever(
        "The direct-answer threshold at 0.5 (issue 34)",
        "The `deft` runs that answer a question directly once DM_direct gives its "
        "passages p >= `tau_direct` = 0.5 (`DEFT_BRIDGE_KEPT`), against the last runs at "
        "the method's 0.7 (`DEFT_TAU07`; both in `bench/render.py`, under "
        "`bench/results/archive/`). "
        "The threshold is also graph expansion's stop test; the `chainrag` rows were made "
        "at 0.7.",
        DEFT_TAU07,
        DEFT_BRIDGE_KEPT,
        "Direct-answer threshold 0.5: words fed at most 390 on every benchmark, EM not "
        "lower anywhere (issue 34)",
    )


def echoed_fallback() -> Section:
    """A fallback answer that only repeats a name of the question is read again."""
    return _lever(
        "Fallback answers that repeat the question",
        "The `deft` runs whose fallback reads once more, without the passages about the "
        "name, when its answer only repeats a name of the question "
        "(`nodes/final.py: read_past_an_echo`), against the last runs without it "
        "(`DEFT_ECHO_KEPT` in `bench/render.py`, under `bench/results/archive/`).",
        DEFT_ECHO_KEPT,
        None,
        "Echoing fallback answers read again: words fed at most 390 on every benchmark, EM "
        "not lower anywhere",
    )


def defended() -> Section:
    """Issues 53 and 55: the default graph as shipped against its last run before them."""
    return _lever(
        "The default graph after issues 53 and 55",
        "The `deft` runs of the answering tables, with the hop as a subgraph, comparisons "
        "fanned out, hostile passages cut at indexing and quoted one to a line, and family "
        "relations walked by their chain, against the last runs before them "
        "(`DEFT_BEFORE_55` in `bench/render.py`, under `bench/results/archive/`).",
        DEFT_BEFORE_55,
        None,
        "The defences of issue 55: `deft` EM not lower on the clean benchmarks, words fed at "
        "most 390",
    )


def deft_speed() -> Section:
    """deft's seconds per question on llama-server against its last run on the old server."""
    rows, standing = [], []
    ratios, em_kept, medians, reuse = [], [], [], []
    pairs, pending = _against_archive(DEFT_BEFORE_SERVER)
    for bench, shared, old, new, em in pairs:
        ratio = new["seconds_median"] / old["seconds_median"]
        ratios.append(ratio)
        em_kept.append(em["b"] >= em["a"])
        medians.append(new["seconds_median"])
        reuse.append(new["prompt_reuse"] or 0)
        rows.append(
            [
                bench,
                shared,
                round(old["seconds_median"], 1),
                round(new["seconds_median"], 1),
                round(ratio, 2),
                f"{em['a']:.3f} / {em['b']:.3f}",
                _p(em["mcnemar_p"]),
                f"{old['llm_calls']:.2f} / {new['llm_calls']:.2f}",
                new["prompt_reuse"],
            ]
        )
    if not rows:
        return "", []
    done = ", ".join(r[0] for r in rows)
    standing = [
        (
            "`deft` median seconds at most half the old server's (issue 33)",
            ", ".join(f"{x:.2f}" for x in ratios) + f" ({done})",
            _met(all(x <= 0.5 for x in ratios)),
        ),
        (
            "`deft` EM not lower on llama-server (issue 33)",
            ", ".join(f"{r[5]}, {_p_says(r[6])}" for r in rows),
            _met(all(em_kept)),
        ),
        (
            "Goal: `deft` under 15 s per question (issue 33)",
            ", ".join(f"{x:.1f} s" for x in medians),
            _met(all(x < 15 for x in medians)),
        ),
        (
            "Goal: at least half of prompt tokens reused (issue 33)",
            ", ".join(f"{x:.3f}" for x in reuse),
            _met(all(x >= 0.5 for x in reuse)),
        ),
    ]
    same_graph, _ = _against_archive(DEFT_BEFORE_SERVER, DEFT_PASSAGE_READING)
    server_alone = ", ".join(
        f"{bench} {new['seconds_median'] / old['seconds_median']:.2f} at EM {em['a']:.3f} / "
        f"{em['b']:.3f}"
        for bench, _, old, new, em in same_graph
    )
    text = _section(
        "Answering speed: `deft` on llama-server",
        "The `deft` runs of the answering tables (first 60 dev questions, `.venv/bin/python "
        "-m bench.run_systems --systems deft`) against the last runs on llama-cpp-python's "
        "server (`DEFT_BEFORE_SERVER` in `bench/render.py`, under `bench/results/archive/`; "
        "parts of those shared the machine, so their seconds are upper bounds). Those read "
        "whole passages: the rows compare today's default with the one issue 33 started "
        "from. The server alone, with the same graph (the `DEFT_PASSAGE_READING` runs), gave "
        f"these median ratios: {server_alone or 'not measured'}. "
        "EM test: `hoprag eval compare ARCHIVED NEW`. `reused`: share of prompt tokens the "
        "server's slots did not read again.",
        _table(
            [
                "benchmark",
                "shared",
                "median s before",
                "median s now",
                "ratio",
                "EM before / now",
                "p (EM)",
                "LLM calls before / now",
                "reused",
            ],
            rows,
        ),
        _targets(
            standing, f"Not rerun on llama-server yet: {', '.join(pending)}." if pending else ""
        ),
    )
    return text, standing


def serve_load() -> Section:
    """Chats at once against one `hoprag serve` on the sample corpus, and (issue 36) through
    two server processes sharing Postgres, Chroma and the model endpoint."""
    found = [load_results(f.stem) for f in sorted(RESULTS.glob("serve_load-*.json"))]
    runs = [r for r in found if r and not r.get("mode")]
    scaled = [r for r in found if r and r.get("mode") == "scale-out"]
    if not runs and not scaled:
        return "", []
    rows = [
        [
            r["graph"],
            r.get("label") or "llama-server",
            r["concurrency"],
            r["runs"],
            r["correct"],
            r["runs_per_min"],
            *(r["latency_s"][k] for k in ("p50", "p90", "max")),
            r["date"][:10],
            r["machine"],
            f"`.venv/bin/{r['command']}`",
        ]
        for r in runs
    ]
    head = ["graph", "server", "at once", "runs", "correct", "runs/min", "p50 s", "p90 s", "max s"]
    standing = []
    deft = {r.get("label") or "llama-server": r for r in runs if r["graph"] == "deft"}
    if {"llama-server", "llama-cpp-python"} <= deft.keys():
        new, old = deft["llama-server"], deft["llama-cpp-python"]
        gain = new["runs_per_min"] / old["runs_per_min"]
        standing.append(
            (
                "8 `deft` chats at once: twice the runs per minute, every answer right (issue 33)",
                f"{gain:.1f}x, {new['correct']} of {new['runs']} right",
                _met(gain >= 2 and new["correct"] == new["runs"]),
            )
        )
    standing.append(_scale_out_standing(scaled))
    text = _section(
        "Chat load",
        "Each run is a new chat thread asking one single-hop question of the sample corpus "
        "through `langgraph_sdk`, against one `hoprag serve` (`server`: its engine). Correct: "
        "the answer contains the gold answer.",
        *([_table([*head, "measured", "machine", "command"], rows)] if rows else []),
        *(f"`{r['label']}`: {r['notes']}" for r in runs if r.get("notes")),
        *_scale_out_parts(scaled),
        _targets(standing),
    )
    return text, standing


def _scale_out_met(r: dict[str, Any]) -> bool:
    """All 16 chats answered, and phase 2 hit the shared QA cache on both servers."""
    load = r["load"]
    return load["runs"] >= 16 and load["lost"] == 0 and r["hits_shared"]


def _scale_out_standing(scaled: list[dict[str, Any]]) -> Standing:
    target = (
        "16 chats at once through two server processes sharing Postgres, Chroma and the "
        "model (issue 36)"
    )
    real = [r for r in scaled if r["graph"] == "deft" and not r.get("label")]
    if not real:
        return target, "not measured yet", "open"
    r = real[0]
    load, hits = r["load"], r["cache_hits_per_server"]
    now = (
        f"{load['answered']} of {load['runs']} answered, {load['correct']} right, "
        f"{load['runs_per_min']} runs/min; shared cache hits per server "
        + " / ".join(str(hits[k]) for k in sorted(hits))
    )
    return target, now, _met(_scale_out_met(r))


def _scale_out_parts(scaled: list[dict[str, Any]]) -> list[str | list[str]]:
    if not scaled:
        return []
    rows = []
    for r in scaled:
        load, hits, entries = r["load"], r["cache_hits_per_server"], r["cache_entries"]
        rows.append(
            [
                r["graph"] + (f" ({r['label']})" if r.get("label") else ""),
                load["runs"],
                load["answered"],
                load["correct"],
                load["runs_per_min"],
                *(load["latency_s"].get(k) for k in ("p50", "p90", "max")),
                " / ".join(str(hits[k]) for k in sorted(hits)),
                f"{entries['after_load']} / {entries['after_sharing']}",
                r["date"][:10],
                r["machine"],
                f"`.venv/bin/{r['command']}`",
            ]
        )
    head = ["graph", "chats", "answered", "correct", "runs/min", "p50 s", "p90 s", "max s"]
    more = ["cache hits per server", "cache rows", "measured", "machine", "command"]
    return [
        "Scale-out (issue 36): `bench.serve_load --scale-out` starts a throwaway PostgreSQL "
        "cluster (checkpoints, QA cache), a Chroma server holding the index's vectors, one "
        "model endpoint (`hoprag llm serve`) and two `hoprag serve` processes on loopback, "
        "all of them sharing those three. Phase 1: each multi-hop sample question sent once "
        "to each server, every chat at once (8 questions: 16 chats); `answered`: chats that "
        "neither failed nor came back without an answer; correct: the answer contains the "
        "gold answer or an alias. Phase 2: the same chats again; `cache hits per server`: "
        "QA-table rows answered from the QA cache on server 1 / server 2, all from the one "
        "shared Postgres table, whose rows (`cache rows`) are counted after phase 1 / 2. "
        "Met when all 16 are answered and both servers hit the shared cache.",
        _table([*head, *more], rows),
    ]


# What `bench.serve_load --replicas` names each engine of `hoprag serve`.
ENGINE_SERVERS = {
    "development": "`hoprag serve` (`langgraph dev`)",
    "production": "`hoprag serve --production` (Aegra)",
}


def production_load() -> Section:
    """Issue 54, item 5: the same chats with follow-ups on both engines of `hoprag serve`,
    two replicas each, then a production replica killed in the middle of the load."""
    target = (
        "Two production replicas, 16 `deft` chats with follow-ups, one replica killed "
        "mid-load: every thread readable from the other, every run in flight completed or "
        "marked failed and resumed, no checkpoint lost (issue 54)"
    )
    r = load_results("serve_load-deft-replicas")
    if not r:
        return "", [(target, "not measured yet", "open")]
    engines, fault = r["engines"], r["fault"]
    rows = [
        [
            ENGINE_SERVERS.get(name, name),
            e["chats"],
            e["turns"],
            e["answered"],
            e["correct"],
            e["lost"],
            e["turns_per_min"],
            *(e["latency_s"].get(k) for k in ("p50", "p90", "max")),
        ]
        for name, e in engines.items()
    ]
    head = ["server", "chats", "turns", "answered", "correct", "lost", "turns/min"]
    ends, follow = fault["seconds_kill_to_end"], fault["follow_ups"]
    counts = [
        ["threads (first turns, all at once)", fault["threads"]],
        ["readable from the other replica (200)", fault["readable"]],
        ["with checkpoints there", fault["with_checkpoints"]],
        ["runs completed before the kill", fault["completed_before_kill"]],
        ["runs completed on the other replica after the kill",
         fault["completed_after_kill_on_survivor"]],
        ["runs in flight on the killed replica", fault["in_flight_on_killed"]],
        ["of those, completed there", fault["completed_there"]],
        ["of those, marked error", fault["marked_error"]],
        ["marked error naming `hoprag resume`", fault["marked_error_naming_resume"]],
        ["not ended in time", fault["not_ended_in_time"]],
        ["seconds from the kill to the last mark", ends.get("max", "-")],
        ["resumed by `hoprag resume` with an answer", fault["resumed"]],
        ["resumed and right", fault["resumed_right"]],
        ["first turns lost for good", fault["lost_for_good"]],
        ["steps streamed to the clients", fault["steps_streamed"]],
        ["checkpoints lost (streamed steps missing from the history)",
         fault["checkpoints_lost"]],
        ["follow-ups sent to the other replica / answered / right",
         f"{follow['sent']} / {follow['answered']} / {follow['correct']}"],
        ["threads holding both answers", fault["threads_with_both_answers"]],
    ]  # fmt: skip
    in_flight = fault["in_flight_on_killed"]
    ok = (
        fault["threads"] >= 16
        and fault["readable"] == fault["with_checkpoints"] == fault["threads"]
        and in_flight > 0
        and fault["completed_there"] + fault["marked_error"] == in_flight
        and fault["marked_error_naming_resume"] == fault["marked_error"]
        and fault["not_ended_in_time"] == 0
        and fault["resumed"] == fault["marked_error"]
        and fault["lost_for_good"] == 0
        and fault["checkpoints_lost"] == 0
    )
    now = (
        f"{fault['readable']} of {fault['threads']} threads readable, {in_flight} run(s) in "
        f"flight: {fault['completed_there']} completed, {fault['marked_error']} marked failed "
        f"(within {ends.get('max', '-')} s), {fault['resumed']} resumed "
        f"({fault['resumed_right']} right); {fault['lost_for_good']} lost, "
        f"{fault['checkpoints_lost']} of {fault['steps_streamed']} streamed steps missing"
    )
    dev, prod = engines.get("development"), engines.get("production")
    standing = [(target, now, _met(ok))]
    if dev and prod:
        standing.append(
            (
                "Production server's load against `langgraph dev`, same machine and run (issue 54)",
                f"{prod['turns_per_min']} against {dev['turns_per_min']} turns/min, p50 "
                f"{prod['latency_s'].get('p50')} against {dev['latency_s'].get('p50')} s, p90 "
                f"{prod['latency_s'].get('p90')} against {dev['latency_s'].get('p90')} s",
                "reported",
            )
        )
    text = _section(
        "Production server: replicas, faults and load",
        _header(r) + "`bench.serve_load --replicas` starts one PostgreSQL server, one Chroma "
        "server holding the index's vectors and one model endpoint (`hoprag llm serve`), "
        "shared by everything, then two replicas of each engine in turn, each engine on a "
        "database of its own (so each starts with an empty QA cache). Each sample question "
        f"goes once to each replica, every chat at once ({r['questions']} questions: "
        f"{r['questions'] * r['replicas']} chats), each a new thread with a follow-up turn "
        "(the next sample question), sent as the README's client sends them (`runs.stream`, "
        '`stream_mode=["updates", "custom"]`). A development replica keeps its threads '
        "in its memory, so a follow-up goes back to it; a production follow-up goes to the "
        "other replica. `turns/min`: answered turns per minute of wall time; seconds: from "
        "the request to the stream's end, answered turns; correct: the answer contains the "
        "gold answer or an alias; lost: an error, or no answer.",
        _table([*head, "p50 s", "p90 s", "max s"], rows),
        "Faults, production only: the QA cache emptied, the same first turns on fresh "
        "threads, and replica 1 SIGKILLed (its process group) once half of its first turns "
        "had ended and each of the others had streamed a step. Then, through replica 2: "
        "each thread and its checkpoint history read; each step a client saw streamed "
        "looked up in that history; each run in flight on replica 1 waited for, to be marked "
        f"`error` within {r['replica_lost_s']} s of silence plus {r['mark_beats']} heartbeats "
        f"of {r['heartbeat_s']} s; those continued by `hoprag resume THREAD --json` (two at "
        "a time); then every thread's follow-up turn sent to replica 2.",
        _table(["after the kill", "count"], counts),
        _targets(standing),
    )
    return text, standing


def main() -> None:
    sections = [
        index_build(),
        sentence_graph(),
        retrieval_recall(),
        answering(),
        sentence_reading(),
        step_fusion(),
        deep_questions(),
        planned_steps(),
        kept_plan(),
        unknown_answers(),
        fallback_in_place(),
        nameless_steps(),
        echoed_answers(),
        replanned_steps(),
        dead_ends(),
        direct_threshold(),
        echoed_fallback(),
        defended(),
        deft_errors(),
        reachable(),
        decision_model(),
        documents(),
        injection(),
        rules_audit(),
        comparisons(),
        serving(),
        engine_speed(),
        deft_speed(),
        serve_load(),
        production_load(),
    ]
    standing = [row for _, rows in sections for row in rows]
    summary = _table(["target", "now", "standing"], [list(row) for row in standing])
    print(INTRO)
    print("## Standing\n\n" + "\n".join(summary) + "\n")
    print("\n".join(text for text, _ in sections if text), end="")


if __name__ == "__main__":
    main()
