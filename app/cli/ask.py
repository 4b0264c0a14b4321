"""`hoprag ask`, `resume` and `trace`: one question's run, checkpointed and replayable.

Command bodies import what loads models, stores or the graph (chromadb, langchain,
langgraph, onnxruntime, torch) when they run, so that `hoprag --help` and light
commands start in a fraction of a second.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from typing import Annotated, Any

import typer

from app.checks import check_question, check_system, require_index
from app.cli.common import load_settings
from app.errors import ServiceError, UserError
from app.eval.metrics import prompt_reuse
from app.index.documents import format_citations
from app.settings import TRACE_DECISION_BATCH, Settings

TraceOpt = Annotated[bool, typer.Option("--trace", help="Show every step and decision live.")]


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


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
    show_passages: Annotated[
        bool, typer.Option("--show-passages", help="Print each passage read with its source.")
    ] = False,
) -> None:
    """Answer a question from an index; every step is checkpointed (`hoprag trace`)."""
    check_system(system)
    question = check_question(question)
    settings = load_settings(top_k=k, index=index)
    require_index(settings, settings.index)
    thread_id = thread or uuid.uuid4().hex
    result, cost = _run(settings, system, {"question": question}, thread_id, trace)
    _print_answer(result, system, thread_id, cost, as_json)
    if show_passages and not as_json:
        _print_passages(settings, [p["id"] for p in result.get("passages") or []])


def _print_passages(settings: Settings, ids: list[int]) -> None:
    """The whole text of each passage read, under the place it comes from."""
    from app.index.store import CorpusIndex  # lazy: chromadb

    index = CorpusIndex.open(settings, settings.index)
    try:
        for record in index.passages(ids):
            typer.echo(f"\n[{record.id}] {record.cite()}\n{textwrap.fill(record.text, 88)}")
    finally:
        index.close()


def _check_thread_id(thread_id: str) -> None:
    if not thread_id.strip() or len(thread_id) > 200:
        raise UserError(f"{thread_id[:40]!r} is not a thread id", hint="see `hoprag ask`")


def _read_thread(thread_id: str) -> Any:
    _check_thread_id(thread_id)
    from app.checkpoints import open_checkpointer, read_run  # lazy: langgraph

    with open_checkpointer(load_settings(), reading=thread_id) as saver:
        return read_run(saver, thread_id)


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
    settings = load_settings(index=record.metadata.get("index"))
    result, cost = _run(settings, system, None, thread_id, trace)
    _print_answer(result, system, thread_id, cost, as_json)


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
        from app.checkpoints import read_server_run  # lazy: langgraph

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
    cited = format_citations(values.get("citations") or [])
    typer.echo(f"cited: {cited or '(none)'}")


def _run(
    settings: Settings,
    system: str,
    graph_input: dict[str, Any] | None,
    thread_id: str,
    trace: bool,
) -> tuple[dict[str, Any], dict[str, float]]:
    """Run (or, with no input, resume) a thread to its end, checkpointing every step;
    the final state and the LLM cost. A model endpoint that fails mid-run stops it with
    a hint to resume: finished steps are kept. Each step is saved before the next starts
    (durability "sync"), so that a run killed at any point loses at most the step it was
    in; and no other process runs the thread meanwhile (its lock)."""
    from app.checkpoints import open_checkpointer  # lazy: langgraph

    # The checkpointer and the thread's lock first: a store that cannot be reached (or a
    # damaged one), or a thread already running, is reported before any model loads.
    with open_checkpointer(settings, running=thread_id) as saver:
        # lazy: the models and the graph (chromadb, langchain, onnxruntime)
        from graph.resources import Resources
        from graph.systems import build_system

        resources = Resources.open(settings, settings.index)
        try:
            graph = build_system(system, resources, checkpointer=saver)
            config = {
                "configurable": {"thread_id": thread_id},
                "metadata": {"system": system, "index": settings.index},
            }
            decision_lines = DecisionLines()
            subgraphs: set[str] = set()  # the graph's nodes that ran a subgraph's steps
            try:
                for namespace, mode, chunk in graph.stream(
                    graph_input,
                    config,
                    context=settings,
                    stream_mode=["updates", "custom"],
                    durability="sync",
                    subgraphs=True,
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
                        subgraphs.update(subgraph_node(namespace))
                        for node, update in chunk.items():
                            if namespace or node not in subgraphs:  # not the steps again
                                _print_step(node, update)
                values = graph.get_state(config).values
            except ServiceError as exc:
                fix = exc.hint or "fix the cause"
                raise ServiceError(
                    f"{exc.message}; the run stopped, its finished steps are saved",
                    hint=f"{fix}; then `hoprag resume {thread_id}` continues it",
                ) from None
            return values, resources.gateway.meter.snapshot()
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
    if payload["citations"]:
        typer.echo(f"  cited: {format_citations(payload['citations'])}", err=True)
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
    for note in update.get("notes") or []:  # whatever a rule noted, by its kind
        shown[note["kind"]] = note["text"]
    details = "  ".join(f"{k}={v}" for k, v in shown.items())
    typer.echo(f"[{node}] {details}".rstrip(), err=err)


def subgraph_node(namespace: tuple[str, ...]) -> list[str]:
    """The parent's node a streamed chunk of a subgraph came from ("hop" for a chunk of
    `("hop:<task id>",)`); none for the graph's own chunks."""
    return [namespace[0].split(":")[0]] if namespace else []


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
