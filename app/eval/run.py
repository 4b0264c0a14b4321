"""The evaluation harness: run a named system over a benchmark, stream one result line per
question, resume after an interruption, and summarise quality and cost (docs/method.md section 5).

A run folder holds run.json (the settings and the date its results were last written),
results.jsonl (one line of scores per question: small, kept in git), traces.jsonl.gz
(each question's node trace, most of a run's bytes: git ignores it) and summary.json.

Every input check (questions, ids, gold indices, the output folder) runs before any model
is loaded, and a folder that holds another run is never written to.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import statistics
import subprocess
import time
import zlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from app.checks import check_name, check_system
from app.dm.features import DM_DIR
from app.errors import UserError
from app.eval.benchmark import Question, check_gold_in_range, load_questions
from app.eval.metrics import (
    chain_covered,
    contain_match,
    exact_match,
    prompt_reuse,
    token_f1,
)
from app.index.corpus import fingerprint, load_corpus
from app.index.indexing import build_index
from app.index.store import CorpusIndex
from app.llm.gateway import LLMGateway
from app.settings import DEFT_SETTINGS, Settings
from graph.resources import Resources
from graph.systems import build_system
from prompts import PROMPT_DIR, load_prompt
from tools.answer_rules import UNKNOWN, normalize_answer
from tools.comparison import RULE
from tools.decision import CALIBRATION_FILE

# Per-question numbers averaged in every summary, and the columns of a summary table.
PER_QUESTION_METRICS = (
    "em",
    "f1",
    "contain",
    "judged",
    "coverage",
    "words_fed",
    "llm_calls",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "dm_calls",
    "dm_seconds",
)
SUMMARY_COLUMNS = (
    "n",
    *PER_QUESTION_METRICS,
    "prompt_reuse",
    "seconds_median",
    "seconds_p90",
)

RESULTS = "results.jsonl"
RUN = "run.json"
SUMMARY = "summary.json"
TRACES = "traces.jsonl.gz"


@dataclass(frozen=True)
class RunConfig:
    """What makes two runs comparable; a resumed run must match it exactly."""

    system: str
    data: str
    split: str
    index: str
    corpus_fingerprint: str
    model: str
    endpoint: str
    retrieval: str
    top_k: int
    judge: str
    deft: str = ""  # DeFT's w, T, thresholds and cache switch; empty for other systems
    chainrag: str = ""  # ChainRAG's integration and thresholds; empty for other systems


def chainrag_signature(settings: Settings) -> str:
    """The ChainRAG settings that change answers."""
    return (
        f"integration={settings.chain_integration} tau_rel={settings.tau_rel} "
        f"tau_direct={settings.tau_direct} {dm_signature(settings)}"
    )


def deft_signature(settings: Settings) -> str:
    """The DeFT settings that change answers, in one comparable string. The rule families
    turned off are named only when there are some, so that runs made before the switch
    existed still match the default's."""
    off = sorted(settings.families_off())
    return " ".join(
        [
            *(f"{n}={getattr(settings, n)}" for n in DEFT_SETTINGS),
            *([f"rules_off={','.join(off)}"] if off else []),
            dm_signature(settings),
        ]
    )


def dm_signature(settings: Settings) -> str:
    """Which decision model judges: the zero-shot calibration and, when used, the trained
    DM (its dm.json holds the calibration and the kinds it serves)."""

    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:12] if path.is_file() else "none"

    trained = digest(DM_DIR / "dm.json") if settings.trained_dm else "off"
    return f"dm_calibration={digest(CALIBRATION_FILE)} trained_dm={trained}"


def derived_index_name(corpus: Path, fp: str) -> str:
    """`musique-058010f3` for DATA/musique/corpus.json: readable and unique."""
    stem = corpus.parent.name if corpus.stem == "corpus" else corpus.stem
    slug = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in stem).strip("-_")
    return check_name(f"{slug or 'corpus'}-{fp[:8]}")


def _read_results(path: Path) -> list[dict[str, Any]]:
    """Finished lines; a line cut short by a kill is dropped (its question reruns)."""
    if not path.is_file():
        return []
    records, good_bytes = [], 0
    with path.open("rb") as fh:
        for raw in fh:
            try:
                records.append(json.loads(raw))
            except json.JSONDecodeError:
                break
            good_bytes += len(raw)
    if good_bytes != path.stat().st_size:
        with path.open("r+b") as fh:
            fh.truncate(good_bytes)
    return records


def append_traces(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Append `{"id", "trace"}` rows to a traces file as one whole gzip member, on disk
    before this returns: a kill leaves at most one member cut short, which readers skip
    (`read_traces`) and a resumed run cuts off (`_trim_traces`)."""
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    with path.open("ab") as fh:
        fh.write(gzip.compress(data, mtime=0))
        fh.flush()
        os.fsync(fh.fileno())


def _trace_members(path: Path) -> tuple[list[bytes], int]:
    """The text of each whole gzip member of a traces file, and how many bytes they fill."""
    blob = memoryview(path.read_bytes())
    members, good = [], 0
    while good < len(blob):
        member = zlib.decompressobj(wbits=31)  # one gzip member
        try:
            text = member.decompress(blob[good:])
        except zlib.error:
            break
        if not member.eof:  # cut short by a kill
            break
        members.append(text)
        good = len(blob) - len(member.unused_data)
    return members, good


def _trim_traces(path: Path) -> None:
    """Cut off a member a kill left unfinished, so that appended members stay readable."""
    if path.is_file():
        good = _trace_members(path)[1]
        if good != path.stat().st_size:
            with path.open("r+b") as fh:
                fh.truncate(good)


def read_traces(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """Each question's trace by id from a run's traces.jsonl.gz; the last one written
    wins (a question rerun after a kill). A clear error where the file is missing, as in
    a fresh clone: traces stay on the machine that made the run."""
    path = Path(folder) / TRACES
    if not path.is_file():
        raise UserError(
            f"{folder} has no {TRACES}: traces stay on the machine that made the run "
            "(git keeps only the scores)",
            hint="run the same `hoprag eval` command into a new --out folder to trace it here",
        )
    return {
        row["id"]: row["trace"]
        for text in _trace_members(path)[0]
        for row in map(json.loads, text.splitlines())
    }


def load_traced_run(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`load_run` with each record's "trace" put back from traces.jsonl.gz."""
    config, records = load_run(folder)
    traces = read_traces(folder)
    missing = [r["id"] for r in records if r["id"] not in traces]
    if missing:
        raise UserError(
            f"{len(missing)} of the {len(records)} questions of {folder} have no trace in "
            f"{TRACES} (first: {missing[0]})"
        )
    return config, [{**r, "trace": traces[r["id"]]} for r in records]


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


def _write_run_file(out: Path, fields_: dict[str, Any]) -> None:
    """run.json, replaced in one step: a kill never leaves it half written."""
    tmp = out / f".{RUN}.tmp"
    tmp.write_text(json.dumps(fields_, indent=2))
    os.replace(tmp, out / RUN)


def _check_out_dir(out: Path, config: RunConfig) -> list[dict[str, Any]]:
    run_file = out / RUN
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} exists and is not a folder")
    if run_file.is_file():
        try:
            previous = json.loads(run_file.read_text())
        except json.JSONDecodeError:
            raise UserError(f"{run_file} is damaged", hint="use another --out folder") from None
        # A field added after a run was started counts as its default for that run.
        defaults = {f.name: f.default for f in fields(RunConfig)}
        diff = [k for k, v in asdict(config).items() if previous.get(k, defaults[k]) != v]
        if diff:
            raise UserError(
                f"{out} holds a run with other settings ({', '.join(diff)}); nothing was "
                "overwritten",
                hint="use another --out folder, or the same settings to resume",
            )
        return _read_results(out / RESULTS)
    if out.is_dir() and any(p.name != f".{RUN}.tmp" for p in out.iterdir()):
        raise UserError(
            f"{out} is not empty and holds no hoprag run", hint="use a new or empty --out folder"
        )
    return []


def _judge_gateway(settings: Settings, reader: LLMGateway) -> tuple[LLMGateway | None, str]:
    """The judge is another model when one is configured, else the reader's model."""
    if settings.judge == "off":
        return None, "off"
    if settings.judge in ("", "reader"):
        return reader, f"{reader.model_name} (same model as the reader)"
    if settings.judge.startswith("http"):
        judge = settings.with_overrides(llm_base_url=settings.judge, llm_model=settings.judge_model)
        return LLMGateway(judge), f"{settings.judge_model or 'default'} at {settings.judge}"
    judge = settings.with_overrides(model=settings.judge, llm_base_url="", llm_model="")
    return LLMGateway(judge), f"{settings.judge} (embedded)"


def judge_answer(judge: LLMGateway | None, q: Question, prediction: str, em: float) -> float | None:
    """1.0 correct / 0.0 incorrect by the LLM judge; exact matches and 'unknown' need no call."""
    if judge is None:
        return None
    if em == 1.0:
        return 1.0
    if not normalize_answer(prediction) or normalize_answer(prediction) == UNKNOWN:
        return 0.0
    gold = q.answer + (f" (also accepted: {', '.join(q.aliases)})" if q.aliases else "")
    messages = load_prompt("judge_answer").format_messages(
        question=q.question, gold=gold, prediction=prediction
    )
    return float(judge.p_yes(messages) >= 0.5)


def _summarise_update(update: Any) -> dict[str, Any]:
    """A compact, JSON-safe view of one node's state update for the trace."""
    if not isinstance(update, dict):
        return {}
    view: dict[str, Any] = {}
    for key, value in update.items():
        if key == "passages":
            view["passage_ids"] = [p["id"] for p in value]
        elif key == "messages":
            continue
        elif key == "thoughts":
            view["thought"] = value[-1] if value else ""
        elif isinstance(value, str | int | float | bool) or value is None:
            view[key] = value
        elif isinstance(value, list):
            view[key] = value[:20]
        elif isinstance(value, dict):  # cache hits, expansions, comparisons: JSON already
            view[key] = value
    return view


def answer_one(
    graph: Any, q: Question, settings: Settings, reader: LLMGateway, judge: LLMGateway | None
) -> dict[str, Any]:
    before = reader.meter.snapshot()
    start = time.perf_counter()
    trace: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    subgraphs: set[str] = set()  # the graph's nodes that ran a subgraph (DeFT's hop)
    # Subgraphs that run at once (a comparison's fan-out) stream their steps interleaved:
    # each one's are held until the graph's next node of its own, then traced one
    # subgraph after the other.
    running: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for namespace, mode, chunk in graph.stream(
        {"question": q.question, "gold_passage_ids": list(q.gold_ids)},
        context=settings,
        stream_mode=["updates", "values"],
        subgraphs=True,
    ):
        if mode == "values":
            if not namespace:  # the graph's state, not a subgraph's
                final = chunk
            continue
        # A subgraph's steps are traced one by one; the update of the node that ran them
        # only repeats what they wrote (DeFT's hop hands back the whole QA table).
        subgraphs.update(part.split(":")[0] for part in namespace[:1])
        if not namespace and not set(chunk) <= subgraphs:
            trace += [step for steps in running.values() for step in steps]
            running.clear()
        for node, update in chunk.items():
            if namespace or node not in subgraphs:
                steps = running.setdefault(namespace, []) if namespace else trace
                steps.append({"node": node, **_summarise_update(update)})
    trace += [step for steps in running.values() for step in steps]
    seconds = time.perf_counter() - start
    cost = {k: after - before[k] for k, after in reader.meter.snapshot().items()}
    prediction = str(final.get("answer") or "")
    fed = final.get("passages") or []
    fed_ids = [p["id"] for p in fed]
    em = exact_match(prediction, q.golds)
    return {
        "id": q.id,
        "question": q.question,
        "group": q.group,
        "gold": q.golds,
        "gold_ids": list(q.gold_ids),
        "prediction": prediction,
        "em": em,
        "f1": token_f1(prediction, q.golds),
        "contain": contain_match(prediction, q.golds),
        "judged": judge_answer(judge, q, prediction, em),
        "coverage": chain_covered(fed_ids, q.gold_ids) if q.gold_ids else None,
        "passages_fed": fed_ids,
        # what was read of the passages read in part (sentences), by passage id
        "excerpts": {str(p["id"]): p["text"] for p in fed if "sentences" in p},
        "words_fed": sum(len(p["text"].split()) for p in fed),
        "llm_calls": int(cost["llm_calls"]),
        "input_tokens": int(cost["input_tokens"]),
        "cached_tokens": int(cost["cached_tokens"]),
        "output_tokens": int(cost["output_tokens"]),
        "dm_calls": sum(d["backend"] != RULE for d in final.get("decisions") or []),
        "dm_seconds": round(sum(d.get("seconds", 0.0) for d in final.get("decisions") or []), 3),
        "seconds": round(seconds, 3),
        "trace": trace,
    }


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.fmean(present), 4) if present else None


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Means of quality and cost, overall and per group (hops / question type)."""

    def block(rows: list[dict[str, Any]]) -> dict[str, Any]:
        seconds = [r["seconds"] for r in rows]
        return {
            "n": len(rows),
            **{k: _mean(r.get(k) for r in rows) for k in PER_QUESTION_METRICS},
            "prompt_reuse": prompt_reuse(rows),
            "seconds_median": round(statistics.median(seconds), 3) if seconds else None,
            "seconds_p90": _percentile(seconds, 0.9),
        }

    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[r["group"] or "all"].append(r)
    return {"all": block(records), "groups": {g: block(rows) for g, rows in sorted(groups.items())}}


def run_eval(
    settings: Settings,
    *,
    data: Path,
    system: str,
    out: Path,
    corpus: Path | None = None,
    index: str | None = None,
    split: str | None = None,
    offset: int = 0,
    limit: int | None = None,
    ids_file: Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run `system` over the questions; returns the summary (also written to OUT)."""
    check_system(system)
    if (corpus is None) == (index is None):
        raise UserError("give exactly one of --corpus and --index")
    questions = load_questions(data, split=split, ids_file=ids_file, offset=offset, limit=limit)
    if corpus is not None:
        passages = load_corpus(corpus)
        check_gold_in_range(questions, len(passages), str(corpus))
        fp = fingerprint(passages)
        index_name = derived_index_name(Path(corpus), fp)
    else:
        opened = CorpusIndex.open(settings, str(index))
        check_gold_in_range(questions, len(opened), f"index {index!r}")
        fp, index_name = opened.manifest["fingerprint"], str(index)
        opened.close()
    if system == "oracle" and not all(q.gold_ids for q in questions):
        raise UserError("the oracle needs 'gold_corpus_idx' for every question")

    reader_name = settings.llm_model or settings.model
    config = RunConfig(
        system=system,
        data=str(Path(data).resolve()),
        split=split or "",
        index=index_name,
        corpus_fingerprint=fp,
        model=reader_name,
        endpoint=settings.llm_base_url or "embedded",
        retrieval=settings.retrieval,
        top_k=settings.top_k,
        judge=settings.judge or "reader",
        deft=deft_signature(settings) if system == "deft" else "",
        chainrag=chainrag_signature(settings) if system == "chainrag" else "",
    )
    done = _check_out_dir(out, config)  # before any model is loaded
    out.mkdir(parents=True, exist_ok=True)
    # `date`: when results were last written (bench.render dates runs by it)
    run_file = {**asdict(config), "date": _run_file_date(out), "code": _run_file_code(out)}
    _write_run_file(out, run_file)
    _trim_traces(out / TRACES)

    if corpus is not None:
        build_index(settings, Path(corpus), index_name, progress=progress)

    finished = {r["id"] for r in done}
    todo = [q for q in questions if q.id not in finished]
    wanted = {q.id for q in questions}
    records = [r for r in done if r["id"] in wanted]
    if todo:
        resources = Resources.open(settings, index_name)
        judge, judge_desc = _judge_gateway(settings, resources.gateway)
        graph = build_system(system, resources)
        try:
            with (
                (out / RESULTS).open("a", encoding="utf-8") as sink,
                tqdm(todo, desc=f"{system}", unit="q", disable=None if progress else True) as bar,
            ):
                for q in bar:
                    record = answer_one(graph, q, settings, resources.gateway, judge)
                    trace = record.pop("trace")
                    # the trace first: a kill before the scores reruns the question, whose
                    # new trace then wins
                    append_traces(out / TRACES, [{"id": record["id"], "trace": trace}])
                    sink.write(json.dumps(record) + "\n")
                    sink.flush()
                    os.fsync(sink.fileno())
                    records.append(record)
                    if run_file["date"] != _today():
                        run_file["date"] = _today()
                        _write_run_file(out, run_file)
                    s = summarise(records)["all"]
                    bar.set_postfix(
                        em=s["em"],
                        f1=round(s["f1"], 3),
                        acc=s["judged"],
                        s_per_q=s["seconds_median"],
                    )
        finally:
            if judge is not None and judge is not resources.gateway:
                judge.close()
            resources.close()
    else:
        judge_desc = (
            json.loads((out / SUMMARY).read_text()).get("judge", "")
            if (out / SUMMARY).is_file()
            else ""
        )
    summary = {"config": asdict(config), "judge": judge_desc, **summarise(records)}
    (out / SUMMARY).write_text(json.dumps(summary, indent=2))
    return summary


def code_version() -> dict[str, str]:
    """What a run's answers depend on besides its settings: the prompts' fingerprint and,
    in a git checkout, the commit (`+changes` with uncommitted edits), so that two runs
    that differ can be told apart by their code."""
    digest = hashlib.sha256()
    for path in sorted(PROMPT_DIR.rglob("*")):
        if path.is_file() and path.suffix in {".md", ".json", ".txt"}:
            digest.update(path.relative_to(PROMPT_DIR).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    version = {"prompts": digest.hexdigest()[:12]}
    root = PROMPT_DIR.parent
    if (root / ".git").exists():
        git = ["git", "-C", str(root)]
        try:
            head = subprocess.run(
                [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
            ).stdout.strip()
            edits = subprocess.run(
                [*git, "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return version
        version["commit"] = head + ("+changes" if edits else "")
    return version


def _run_file_code(out: Path) -> list[dict[str, str]]:
    """The code versions a run folder's answers came from: its earlier ones (a resumed
    run) and this one."""
    try:
        versions = json.loads((out / RUN).read_text()).get("code") or []
    except FileNotFoundError:
        versions = []
    now = code_version()
    return versions if now in versions else [*versions, now]


def _run_file_date(out: Path) -> str | None:
    """The date a run folder's run.json gives, if any (None for a new run)."""
    try:
        return json.loads((out / RUN).read_text()).get("date")
    except FileNotFoundError:
        return None


def load_run(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(run config, result records) of a finished or partial run folder; the records
    without their traces (`load_traced_run`)."""
    run_file = Path(folder) / RUN
    if not run_file.is_file():
        raise UserError(f"{folder} holds no hoprag run (no {RUN})")
    return json.loads(run_file.read_text()), _read_results(Path(folder) / RESULTS)
