"""The compiled DeFT graph along each of its routes, in the fast tier: the scripted
writer, a stub DM and a stub retriever over a four-passage corpus, and a real QA cache
in a private SQLite file. Each test checks the nodes the graph ran, in order, and the
state after the turn. A comparison fans out: one hop per option, in parallel."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stubs import NoExamples, ScriptedWriter

from app.index.store import PassageRecord
from app.settings import Settings
from graph.deft import build_deft
from graph.resources import Resources
from tests.conftest import DEMO_QUESTION
from tools.qa_cache import QACache
from tools.retriever import RetrievedPassage

FIRST = "Where is Tavistrom College located?"
SECOND = "Which river flows through Brisk Hollow?"
CORPUS = {
    1: ("Tavistrom College", "Tavistrom College is a college in Brisk Hollow."),
    2: ("Brisk Hollow", "Brisk Hollow is a town on the Ulden River."),
    3: ("Ulden River", "The Ulden River is a river in the north."),
    4: ("Dunmere College", "Dunmere College is a college on the Brask River."),
    5: ("Augustin Reyvald", "Augustin Reyvald (born 3 May 1801) founded Tavistrom College."),
    6: ("Mara Quell", "Mara Quell (born 1795) founded Dunmere College."),
}
# A comparison, and the sub-questions of its two options: who founded each, then when
# each founder was born.
COMPARE = "Which college has the founder born first, Tavistrom College or Dunmere College?"
FOUNDERS = ("Who founded Tavistrom College?", "Who founded Dunmere College?")
BIRTHS = ("When was Augustin Reyvald born?", "When was Mara Quell born?")
# What the stub retriever finds for each query (ids, best first); other queries find nothing.
FOUND = {
    DEMO_QUESTION: [1, 2, 4],
    FIRST: [1, 4],
    SECOND: [2, 3],
    COMPARE: [1, 4],
    FOUNDERS[0]: [1, 5],
    FOUNDERS[1]: [4, 6],
    BIRTHS[0]: [5],
    BIRTHS[1]: [6],
}

# The nodes every DeFT turn starts and ends with, and the ones of one step that retrieves:
# the hop subgraph's nodes, then the hop itself (the turn's node, which ends when they do).
START = ["take_question", "retrieve_question_passages", "check_direct_answer"]
ASK = ["write_sub_question", "guard_self_contained", "lookup_qa_cache"]
READ = ["retrieve_for_sub_question", "filter_relevant", "select_evidence", "answer_sub_question"]
STEP = [*ASK, *READ, "update_qa_table", "hop", "check_sufficiency"]
UPDATES: list[tuple[str, dict[str, Any]]] = []  # the last turn's streamed (node, update)


def updates_of(node: str) -> list[dict[str, Any]]:
    return [update for name, update in UPDATES if name == node]


# The keys of a turn's state; a step's own (retrieved, kept, sub_answer, ...) are not.
TURN_KEYS = {
    *("question", "messages", "contextualised_from", "citations", "question_passages"),
    *("question_retrieval", "direct", "hop", "sub_question", "plan", "plan_step", "branches"),
    *("qa_table", "unanswerable", "sufficient", "decisions", "passages", "answer"),
    *("answer_passage_ids", "comparison", "notes"),
}


class StubRetriever:
    """Finds the passages `FOUND` lists for a query, and keeps every query it was sent."""

    def __init__(self, found: dict[str, list[int]]) -> None:
        self.found, self.queries = found, []

    def retrieve(self, query: str, k: int) -> list[RetrievedPassage]:
        self.queries.append(query)
        ids = self.found.get(query, [])[:k]
        return [RetrievedPassage(i, *CORPUS[i], 1.0 / (rank + 1)) for rank, i in enumerate(ids)]

    def retrieve_with_signals(self, query: str, k: int) -> tuple[list, list[float]]:
        return self.retrieve(query, k), [0.5, 0.1, 10.0]


class StubIndex:
    """The corpus, with each passage stored as one sentence."""

    def sentences_of(self, passage_id: int) -> list[str]:
        return []

    def passages(self, ids: list[int]) -> list[PassageRecord]:
        return [PassageRecord(i, *CORPUS[i]) for i in ids]


class StubDM:
    """Every passage relevant; the question shallow and directly answerable as told; the
    table sufficient from `suff_rows` rows on. Keeps the kinds it was asked, in order."""

    def __init__(self, *, direct: bool = False, suff_rows: int = 2) -> None:
        self.direct, self.suff_rows, self.asked = direct, suff_rows, []

    def backend(self, kind: str) -> str:
        return "stub"

    def p_shallow(self, question: str) -> float:
        self.asked.append("depth")
        return 0.9

    def p_direct(self, question: str, passages: list, retrieval: list | None = None) -> float:
        self.asked.append("direct")
        return 0.9 if self.direct else 0.1

    def p_rel(self, question: str, passages: list, **how: Any) -> list[float]:
        self.asked.append("rel")
        return [0.9] * len(passages)

    def p_same(self, first: str, second: str) -> float:
        self.asked.append("same")
        return 0.0

    def p_suff(self, question: str, table: list) -> float:
        self.asked.append("suff")
        return 0.9 if len(table) >= self.suff_rows else 0.1


class NoVectors:
    """Embeddings that match nothing: the QA cache finds exact matches only."""

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts), 4), dtype=np.float32)


@pytest.fixture
def turn_settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path).with_overrides(
        direct_answer=True, qa_cache=True, max_steps=6, sub_questions="write"
    )


@pytest.fixture
def fan_out_settings(turn_settings: Settings) -> Settings:
    return turn_settings.with_overrides(fan_out_comparisons=True)


@pytest.fixture
def cache(turn_settings: Settings):
    opened = QACache.open(turn_settings, "sample", "fp", NoVectors())  # type: ignore[arg-type]
    yield opened
    opened.close()


def stub_resources(
    settings: Settings,
    cache: QACache,
    dm: StubDM,
    writer: ScriptedWriter,
    retriever: StubRetriever,
) -> Resources:
    return Resources(
        settings=settings,
        gateway=writer,  # type: ignore[arg-type]
        index=StubIndex(),  # type: ignore[arg-type]
        retriever=retriever,  # type: ignore[arg-type]
        dm=dm,  # type: ignore[arg-type]
        qa_cache=cache,
        examples=NoExamples(),  # type: ignore[arg-type]
        sentence_graph=None,
    )


def run_turn(
    settings: Settings, cache: QACache, dm: StubDM, writer: ScriptedWriter
) -> tuple[list[str], dict[str, Any], StubRetriever]:
    """One turn of the compiled graph: the nodes it ran (the hop subgraph's inside each
    hop), its final state, the retriever. The nodes' updates are in `UPDATES`."""
    retriever = StubRetriever(FOUND)
    graph = build_deft(stub_resources(settings, cache, dm, writer, retriever))
    nodes, state = [], {}
    UPDATES.clear()
    for namespace, mode, chunk in graph.stream(
        {"question": DEMO_QUESTION},
        context=settings,
        stream_mode=["updates", "values"],
        subgraphs=True,
    ):
        if mode == "updates":
            nodes += list(chunk)
            UPDATES.extend((node, update or {}) for node, update in chunk.items())
        elif not namespace:  # the turn's state, not a step's
            state = chunk
    assert not writer.replies, "the graph made fewer LLM calls than scripted"
    assert set(state) <= TURN_KEYS, "a step's own keys reached the turn's state"
    return nodes, state, retriever


def notes(state: dict[str, Any]) -> list[tuple[str, str]]:
    return [(n["kind"], n["text"]) for n in state.get("notes") or []]


def rows(state: dict[str, Any]) -> list[tuple[str, str, list[int], str]]:
    return [
        (r["sub_question"], r["answer"], r["passage_ids"], r["source"])
        for r in state.get("qa_table") or []  # a direct answer runs no step: no table
    ]


def test_a_direct_answer_reads_the_question_passages_once(
    turn_settings: Settings, cache: QACache
) -> None:
    dm, writer = StubDM(direct=True), ScriptedWriter("Ulden River")
    nodes, state, retriever = run_turn(turn_settings, cache, dm, writer)
    assert nodes == [*START, "answer_directly", "reply"]
    assert state["direct"] is True and state["answer"] == "Ulden River"
    assert state["hop"] == 0 and rows(state) == [] and retriever.queries == [DEMO_QUESTION]
    assert dm.asked == ["depth", "direct", "rel", "rel"]  # DM_rel: passages, then sentences
    assert state["answer_passage_ids"] == [1, 2, 4]
    assert [c["id"] for c in state["citations"]] == [1, 2, 4]
    assert state["messages"][-1].content.startswith("Ulden River\n\nSources: ")


def test_a_two_hop_chain_answers_from_its_qa_table(turn_settings: Settings, cache: QACache) -> None:
    writer = ScriptedWriter(FIRST, "Brisk Hollow", SECOND, "Ulden River", "Ulden River")
    dm = StubDM(suff_rows=2)
    nodes, state, retriever = run_turn(turn_settings, cache, dm, writer)
    assert nodes == [*START, *STEP, *STEP, "answer_from_qa_table", "reply"]
    assert rows(state) == [
        (FIRST, "Brisk Hollow", [1, 4], "retrieved"),
        (SECOND, "Ulden River", [2, 3], "retrieved"),
    ]
    assert state["hop"] == 2 and state["sufficient"] is True
    assert state["answer"] == "Ulden River" and state["direct"] is False
    assert retriever.queries == [DEMO_QUESTION, FIRST, SECOND]
    # The trace streams each step's own keys, which the turn's state does not keep.
    assert [u["sub_answer"] for u in updates_of("answer_sub_question")] == [
        "Brisk Hollow",
        "Ulden River",
    ]
    assert [u["written_by"] for u in updates_of("write_sub_question")] == ["writer"] * 2
    assert [[p["id"] for p in u["retrieved"]] for u in updates_of("retrieve_for_sub_question")] == [
        [1, 4],
        [2, 3],
    ]
    assert [d["kind"] for d in state["decisions"] if d["kind"] == "suff"] == ["suff", "suff"]
    assert [d["outcome"] for d in state["decisions"] if d["kind"] == "suff"] == [False, True]
    # Both answers went into the shared cache.
    assert cache.exact(FIRST).answer == "Brisk Hollow"  # type: ignore[union-attr]
    assert cache.exact(SECOND).answer == "Ulden River"  # type: ignore[union-attr]


def test_a_cached_sub_question_is_neither_retrieved_for_nor_read(
    turn_settings: Settings, cache: QACache
) -> None:
    cache.put(FIRST, "Brisk Hollow", [1])
    writer = ScriptedWriter(FIRST, SECOND, "Ulden River", "Ulden River")
    nodes, state, retriever = run_turn(turn_settings, cache, StubDM(suff_rows=2), writer)
    cached_step = [*ASK, "update_qa_table", "hop", "check_sufficiency"]
    assert nodes == [*START, *cached_step, *STEP, "answer_from_qa_table", "reply"]
    assert rows(state) == [
        (FIRST, "Brisk Hollow", [1], "cache"),
        (SECOND, "Ulden River", [2, 3], "retrieved"),
    ]
    assert state["hop"] == 2 and state["answer"] == "Ulden River"
    assert retriever.queries == [DEMO_QUESTION, SECOND]  # nothing retrieved for FIRST
    assert [u["cache_hit"] for u in updates_of("lookup_qa_cache")] == [
        {"sub_question": FIRST, "answer": "Brisk Hollow", "passage_ids": [1], "how": "exact"},
        None,
    ]
    assert cache.stats()["by_outcome"] == {"exact": 1, "miss": 1}


def test_a_dead_end_hands_over_to_the_fallback(turn_settings: Settings, cache: QACache) -> None:
    unfound = "Which college did Tavistrom found?"
    writer = ScriptedWriter(unfound, "unknown", "Ulden River")
    nodes, state, retriever = run_turn(
        turn_settings.with_overrides(max_steps=1), cache, StubDM(), writer
    )
    assert nodes == [*START, *STEP, "fallback_answer", "reply"]
    assert state["qa_table"] == [] and state["unanswerable"] == [unfound]
    assert state["hop"] == 1 and state["sufficient"] is False
    assert notes(state) == [
        ("fallback_reason", "1 steps taken"),
        ("fallback_question", DEMO_QUESTION),
    ]
    assert state["answer"] == "Ulden River" and state["answer_passage_ids"] == [1, 2, 4]
    # the fallback searches the question again
    assert retriever.queries == [DEMO_QUESTION, unfound, DEMO_QUESTION]
    assert cache.stats()["entries"] == 0  # no answer, nothing cached


class DyingWriter(ScriptedWriter):
    """The scripted writer, whose server dies once, at call `dies_at` (1 = the first)."""

    def __init__(self, *replies: str, dies_at: int) -> None:
        super().__init__(*replies)
        self.calls, self.dies_at = 0, dies_at

    def invoke(self, messages: list[Any], max_tokens: int | None = None) -> str:
        self.calls += 1
        if self.calls == self.dies_at:
            raise ConnectionError("the model server died")
        return super().invoke(messages, max_tokens)


def test_a_run_stopped_inside_a_hop_resumes_there_and_traces_every_step(
    turn_settings: Settings, cache: QACache
) -> None:
    """The hop subgraph checkpoints into the turn's checkpointer under its own namespace:
    `hoprag trace` (read_run) lists its steps, a run stopped inside it is due at its next
    step, and resuming redoes no finished LLM call."""
    from app.checkpoints import open_checkpointer, read_run

    # The two-hop chain; the server dies at the 4th call, the second hop's answer.
    replies = (FIRST, "Brisk Hollow", SECOND, "Ulden River", "Ulden River")
    writer = DyingWriter(*replies, dies_at=4)
    resources = stub_resources(turn_settings, cache, StubDM(), writer, StubRetriever(FOUND))
    config = {"configurable": {"thread_id": "stopped"}}
    inner = [*ASK, *READ, "update_qa_table"]
    with open_checkpointer(turn_settings) as saver:
        graph = build_deft(resources, checkpointer=saver)
        run = {"context": turn_settings, "durability": "sync", "subgraphs": True}
        with pytest.raises(ConnectionError):
            list(graph.stream({"question": DEMO_QUESTION}, config, **run))  # type: ignore[arg-type]
        stopped = read_run(saver, "stopped")
        assert not stopped.finished and stopped.pending == ["answer_sub_question"]
        assert [s.node for s in stopped.steps] == [
            *START,
            *inner,
            "check_sufficiency",
            *ASK,
            *READ[:-1],
        ]
        assert stopped.values["hop"] == 1  # the turn's state: the first hop's
        list(graph.stream(None, config, **run))  # type: ignore[arg-type]
        record = read_run(saver, "stopped")
    assert not writer.replies and writer.calls == len(replies) + 1  # none made twice
    assert record.finished and record.values["answer"] == "Ulden River"
    assert [s.node for s in record.steps] == [
        *START,
        *[*inner, "check_sufficiency"] * 2,
        "answer_from_qa_table",
        "reply",
    ]
    steps = {s.node: s.update for s in record.steps}
    assert steps["answer_sub_question"]["sub_answer"] == "Ulden River"  # the second hop's
    assert [r["answer"] for r in record.values["qa_table"]] == ["Brisk Hollow", "Ulden River"]


class KeyedWriter(ScriptedWriter):
    """The scripted writer, but a sub-question's answer is the reply keyed by it, however
    the parallel branches of a fan-out order their calls."""

    def __init__(self, *writes: str, answers: dict[str, str]) -> None:
        super().__init__(*writes)
        self.answers = dict(answers)

    def invoke(self, messages: list[Any], max_tokens: int | None = None) -> str:
        asked = messages[-1].content
        for sub_question in list(self.answers):
            if f"\nQuestion: {sub_question}\nAnswer:" in asked:
                return self.answers.pop(sub_question)
        return super().invoke(messages, max_tokens)


class MeetingRetriever(StubRetriever):
    """The stub retriever, whose searches for the sub-questions of two options wait for
    each other: two steps that ran one after the other would never meet (a broken
    barrier), so a turn that ends proves they ran at once."""

    def __init__(self, found: dict[str, list[int]], pairs: list[tuple[str, ...]]) -> None:
        super().__init__(found)
        self.waiting = {q for pair in pairs for q in pair}
        self.barrier = threading.Barrier(2, timeout=10)

    def retrieve(self, query: str, k: int) -> list[RetrievedPassage]:
        if query in self.waiting:
            self.barrier.wait()
        return super().retrieve(query, k)


def run_comparison(
    settings: Settings, cache: QACache, writer: KeyedWriter, retriever: StubRetriever
) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """One turn of the comparison: the (namespace, node) of every update, in stream order
    (a branch's namespace is `hop:<task id>`, the turn's ""), and the turn's state."""
    graph = build_deft(stub_resources(settings, cache, StubDM(), writer, retriever))
    ran, state = [], {}
    for namespace, mode, chunk in graph.stream(
        {"question": COMPARE},
        context=settings,
        stream_mode=["updates", "values"],
        subgraphs=True,
    ):
        if mode == "updates":
            ran += [(namespace[0] if namespace else "", node) for node in chunk]
        elif not namespace:
            state = chunk
    assert not writer.replies and not writer.answers, "fewer LLM calls than scripted"
    assert set(state) <= TURN_KEYS, "a step's own keys reached the turn's state"
    return ran, state


ANSWERS = {
    FOUNDERS[0]: "Augustin Reyvald",
    FOUNDERS[1]: "Mara Quell",
    BIRTHS[0]: "3 May 1801",
    BIRTHS[1]: "1795",
}


def test_a_comparison_fans_out_one_step_per_option_in_parallel(
    fan_out_settings: Settings, cache: QACache
) -> None:
    """The writer writes the first option's sub-question; the second option's is the
    same about its own name; both steps run at once, and the table the date rule reads
    holds the rows of both, in the order the branches were sent."""
    writer = KeyedWriter(FOUNDERS[0], BIRTHS[0], answers=ANSWERS)
    retriever = MeetingRetriever(FOUND, [FOUNDERS, BIRTHS])
    ran, state = run_comparison(fan_out_settings, cache, writer, retriever)
    fan_out = ["write_option_sub_questions", "hop", "hop", "check_sufficiency"]
    assert [node for namespace, node in ran if not namespace] == [
        *START,
        *fan_out,
        *fan_out,
        "answer_from_qa_table",
        "reply",
    ]
    branches: dict[str, list[str]] = {}
    for namespace, node in ran:
        if namespace:
            branches.setdefault(namespace, []).append(node)
    assert len(branches) == 4 and all(namespace.startswith("hop:") for namespace in branches)
    assert all(nodes == [*ASK, *READ, "update_qa_table"] for nodes in branches.values())
    assert rows(state) == [
        (FOUNDERS[0], "Augustin Reyvald", [1, 5], "retrieved"),
        (FOUNDERS[1], "Mara Quell", [4, 6], "retrieved"),
        (BIRTHS[0], "3 May 1801", [5], "retrieved"),
        (BIRTHS[1], "1795", [6], "retrieved"),
    ]
    assert state["hop"] == 4 and state["unanswerable"] == [] and state["sufficient"] is True
    assert state["sub_question"] == BIRTHS[1]  # the last branch sent
    assert state["answer"] == "Dunmere College"
    assert state["comparison"]["values"] == {
        "Tavistrom College": "1801-5-3",
        "Dunmere College": "1795",
    }
    assert notes(state) == [
        ("fan_out", f"2 branches: {FOUNDERS[0]} | {FOUNDERS[1]}"),
        ("fan_out", f"2 branches: {BIRTHS[0]} | {BIRTHS[1]}"),
    ]
    suff = [d for d in state["decisions"] if d["kind"] == "suff"]
    assert [(d["inputs"], d["outcome"]) for d in suff] == [([2], False), ([4], True)]
    # Each branch numbered its step after those sent before it.
    steps = sorted({d["step"] for d in state["decisions"] if d["kind"] == "rel"})
    assert steps == [1, 2, 3, 4]


def test_with_fan_out_off_a_comparison_takes_one_step_at_a_time(
    turn_settings: Settings, cache: QACache
) -> None:
    writer = KeyedWriter(FOUNDERS[0], BIRTHS[0], FOUNDERS[1], BIRTHS[1], answers=ANSWERS)
    turn_settings = turn_settings.with_overrides(fan_out_comparisons=False)
    ran, state = run_comparison(turn_settings, cache, writer, StubRetriever(FOUND))
    assert [node for _, node in ran] == [*START, *STEP * 4, "answer_from_qa_table", "reply"]
    assert [r[0] for r in rows(state)] == [FOUNDERS[0], BIRTHS[0], FOUNDERS[1], BIRTHS[1]]
    assert state["hop"] == 4 and state["answer"] == "Dunmere College"
    assert notes(state) == []


def test_hoprag_trace_lists_each_branch_of_a_fan_out_whole(
    fan_out_settings: Settings, cache: QACache
) -> None:
    """`hoprag trace` (read_run) lists the steps of branches that ran at once one branch
    after the other, each with its own sub-question, between the turn's steps."""
    from app.checkpoints import open_checkpointer, read_run

    writer = KeyedWriter(FOUNDERS[0], BIRTHS[0], answers=ANSWERS)
    resources = stub_resources(fan_out_settings, cache, StubDM(), writer, StubRetriever(FOUND))
    config = {"configurable": {"thread_id": "compared"}}
    with open_checkpointer(fan_out_settings) as saver:
        graph = build_deft(resources, checkpointer=saver)
        run = {"context": fan_out_settings, "durability": "sync", "subgraphs": True}
        list(graph.stream({"question": COMPARE}, config, **run))  # type: ignore[arg-type]
        record = read_run(saver, "compared")
    inner = [*ASK, *READ, "update_qa_table"]
    fan_out = ["write_option_sub_questions", *inner, *inner, "check_sufficiency"]
    assert record.finished and record.values["answer"] == "Dunmere College"
    assert [s.node for s in record.steps] == [
        *START,
        *fan_out,
        *fan_out,
        "answer_from_qa_table",
        "reply",
    ]
    asked = [s.update["sub_question"] for s in record.steps if s.node == "write_sub_question"]
    assert set(asked[:2]) == set(FOUNDERS) and set(asked[2:]) == set(BIRTHS)
    answered = [s.update["sub_answer"] for s in record.steps if s.node == "answer_sub_question"]
    assert answered == [ANSWERS[q] for q in asked]  # each branch's steps together


def test_an_evaluated_fan_out_traces_each_branch_whole(
    fan_out_settings: Settings, cache: QACache
) -> None:
    """`hoprag eval` keeps a question's trace from the stream, where branches that ran at
    once interleave: each branch's steps are traced together, after its fan-out."""
    from app.eval.benchmark import Question
    from app.eval.run import answer_one
    from app.llm.gateway import UsageMeter

    writer = KeyedWriter(FOUNDERS[0], BIRTHS[0], answers=ANSWERS)
    writer.meter = UsageMeter()  # type: ignore[attr-defined]
    retriever = MeetingRetriever(FOUND, [FOUNDERS, BIRTHS])  # the branches interleave
    graph = build_deft(stub_resources(fan_out_settings, cache, StubDM(), writer, retriever))
    question = Question("q1", COMPARE, "Dunmere College", group="bridge_comparison")
    record = answer_one(graph, question, fan_out_settings, writer, None)  # type: ignore[arg-type]
    assert record["em"] == 1.0
    inner = [*ASK, *READ, "update_qa_table"]
    fan_out = ["write_option_sub_questions", *inner, *inner, "check_sufficiency"]
    trace = record["trace"]
    assert [s["node"] for s in trace] == [
        *START,
        *fan_out,
        *fan_out,
        "answer_from_qa_table",
        "reply",
    ]
    asked = [s["sub_question"] for s in trace if s["node"] == "write_sub_question"]
    answered = [s["sub_answer"] for s in trace if s["node"] == "answer_sub_question"]
    assert answered == [ANSWERS[q] for q in asked]
