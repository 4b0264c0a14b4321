"""The DeFT graph's rules and tools, each on its own: keep rules, routing, the
self-containedness guard, the QA cache (restart, stale corpus, concurrent writers) and
the calibration maths."""

from __future__ import annotations

import multiprocessing
import sqlite3
import uuid
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stubs import NoExamples, Runtime, ScriptedWriter

from app.dm.calibration import Platt, fit_platt, logit, sigmoid
from app.errors import ServiceError, UserError
from app.index.qa_store import SqliteStore
from app.llm.engine import free_port
from app.settings import Settings
from graph.deft import (
    route_after_cache,
    route_after_direct_check,
    route_after_final_answer,
    route_after_hop,
    route_after_sub_question,
    route_after_sufficiency,
)
from graph.state import merge_passages
from nodes.cache import lookup_qa_cache
from nodes.direct import answer_directly, check_direct_answer
from nodes.final import (
    fallback_reason,
    read_facts_and_passages,
    read_past_an_echo,
)
from nodes.qa_table import update_qa_table
from nodes.question import take_question
from nodes.sub_question import write_sub_question
from tests.conftest import DEMO_QUESTION
from tools.answer_rules import clean_answer, is_unknown
from tools.decision import Calibration, DecisionModel
from tools.qa_cache import QACache
from tools.question_rules import (
    answer_in_place,
    clean_sub_question,
    echoes_question,
    has_back_reference,
    may_share_an_answer,
    rejection,
    with_answers_in_place,
)
from tools.reading import read_passages
from tools.relevance import fused_with_retrieval, keep_for_fallback, keep_relevant

PASSAGES = [{"id": i, "title": f"T{i}", "text": "x"} for i in range(6)]


@pytest.mark.parametrize(
    ("scores", "none_kept", "expected"),
    [
        ([0.9, 0.1, 0.8, 0.7, 0.2, 0.6], 5, [0, 2, 3, 5]),  # passing ones, best first
        ([0.9, 0.8, 0.7, 0.6, 0.55, 0.51], 5, [0, 1, 2, 3, 4]),  # at most 5
        ([0.1, 0.9, 0.3, 0.2, 0.0, 0.0], 5, [1, 2]),  # exactly one passes: top 2
        ([0.1, 0.2, 0.3, 0.4, 0.05, 0.0], 5, [3, 2, 1, 0, 4]),  # none passes: top 5
        ([0.1, 0.2, 0.3, 0.4, 0.05, 0.0], 2, [3, 2]),  # none passes, HOPRAG_NONE_KEPT=2
    ],
)
def test_keep_rules(scores: list[float], none_kept: int, expected: list[int]) -> None:
    kept = keep_relevant(PASSAGES, scores, tau=0.5, max_kept=5, none_kept=none_kept)
    assert [p["id"] for p in kept] == expected


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.1, 0.9, 0.3, 0.2, 0.0, 0.0], [1, 0]),  # one passes: it, then retrieval's top
        ([0.9, 0.8, 0.1, 0.1, 0.7, 0.6], [0, 1, 2, 4]),  # four pass: retrieval's 3rd displaces one
        ([0.2, 0.1, 0.0, 0.0, 0.0, 0.3], [0, 5, 1, 2, 3]),  # none passes: five, fused
    ],
)
def test_a_step_keeps_by_relevance_fused_with_retrieval_rank(
    scores: list[float], expected: list[int]
) -> None:
    """How many comes from the keep rules; which, from DM_rel and retrieval rank fused."""
    kept = keep_relevant(
        PASSAGES, scores, tau=0.5, max_kept=5, none_kept=5, order=fused_with_retrieval(scores)
    )
    assert [p["id"] for p in kept] == expected


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.0, 0.0, 0.0, 0.1, 0.2, 0.3], [0, 1, 2, 3]),  # retrieval order, even if all fail
        ([0.9, 0.9, 0.9, 0.9, 0.6, 0.8], [0, 1, 2, 3, 5, 4]),  # passing lower ones, best first
        ([0.1, 0.1, 0.1, 0.1, 0.4, 0.7], [0, 1, 2, 3, 5]),  # a failing lower one stays out
    ],
)
def test_fallback_keeps_the_retrieval_head_and_relevant_lower_passages(
    scores: list[float], expected: list[int]
) -> None:
    kept = keep_for_fallback(PASSAGES, scores, tau=0.5, head=4, extra=2)
    assert [p["id"] for p in kept] == expected


def test_routing() -> None:
    runtime = Runtime(Settings(max_steps=3))
    assert route_after_direct_check({"direct": True}, runtime) == "answer_directly"
    assert route_after_direct_check({"direct": False}, runtime) == "hop"
    assert route_after_cache({"cache_hit": {"answer": "x"}}) == "update_qa_table"
    assert route_after_cache({"cache_hit": None}) == "retrieve_for_sub_question"
    assert route_after_sub_question({"sub_question": "Who?"}) == "guard_self_contained"
    assert route_after_sub_question({"sub_question": ""}) == "__end__"  # the step ends
    assert route_after_hop({"sub_question": "Who?"}) == "check_sufficiency"
    assert route_after_hop({"sub_question": ""}) == "fallback_answer"
    assert route_after_sufficiency({"sufficient": True, "hop": 3}, runtime) == (
        "answer_from_qa_table"
    )
    assert route_after_sufficiency({"sufficient": False, "hop": 2}, runtime) == "hop"
    assert route_after_sufficiency({"sufficient": False, "hop": 3}, runtime) == ("fallback_answer")
    one_dead_end = {"sufficient": False, "hop": 2, "unanswerable": ["Who?"]}
    assert route_after_sufficiency(one_dead_end, runtime) == "hop"
    two_dead_ends = {**one_dead_end, "unanswerable": ["Who?", "Where?"]}
    assert route_after_sufficiency(two_dead_ends, runtime) == "fallback_answer"
    # A comparison writes its next steps for every option at once, unless fan-out is off.
    compared = {"question": "Who was born first, Ann Obi or Bo Lind?", "hop": 2}
    serial = Runtime(Settings(max_steps=3, fan_out_comparisons=False))
    assert route_after_direct_check(compared, runtime) == "write_option_sub_questions"
    assert route_after_sufficiency(compared, runtime) == "write_option_sub_questions"
    assert route_after_sufficiency(compared, serial) == "hop"
    # The fallback's trace says why the loop handed over.
    dead_end = {**two_dead_ends, "sub_question": "Where?"}
    assert fallback_reason(dead_end, 3) == "2 sub-questions found no answer"
    assert fallback_reason({**one_dead_end, "sub_question": "Who?", "hop": 3}, 3) == (
        "3 steps taken"
    )
    assert fallback_reason({"sub_question": ""}, 3) == "no sub-question could be asked"
    assert fallback_reason({"sufficient": True}, 3) == "LLM_fin found no answer in the table"
    assert route_after_final_answer({"answer": "Unknown."}) == "fallback_answer"
    assert route_after_final_answer({"answer": ""}) == "fallback_answer"
    assert route_after_final_answer({"answer": "Oberlin College"}) == "reply"


def test_back_references() -> None:
    for q in [
        "Where was he born?",
        "Who founded this company?",
        "When did the band release its first album?",
        "What river flows through that city?",
        "What football club plays in this area?",
        "What is the natural boundary between these two countries?",
    ]:
        assert has_back_reference(q), q
    for q in [
        "Who founded Velloway Ironworks?",
        "Where was Odile Farrengast born?",
        "Which city is the capital of Italy?",
        "Who sang These Arms of Mine?",
        "What was the population of the city in the same county as Allen?",
    ]:
        assert not has_back_reference(q), q


def test_text_cleaning() -> None:
    assert clean_sub_question("Next question: Who founded Norr Lighting?\nextra") == (
        "Who founded Norr Lighting?"
    )
    assert clean_sub_question("1. Who wrote Dune") == "Who wrote Dune?"
    assert clean_sub_question("  \n ") == ""
    assert is_unknown("Unknown.") and is_unknown("") and is_unknown("not mentioned")
    assert not is_unknown("Oskelund")
    assert clean_answer('Answer: "Ulden River".\nBecause ...') == "Ulden River"
    assert clean_answer("**Ulden River.**") == clean_answer("A: Ulden River") == "Ulden River"
    assert clean_answer("Washington, D.C.") == "Washington, D.C"  # one final period goes
    assert clean_answer(' "" ') == clean_answer("\n") == "unknown"
    taken = take_question({"question": "  Who\x00 is\tit? "}, fresh={})
    assert taken["question"] == "Who is it?"
    assert [m.content for m in taken["messages"]] == ["Who is it?"]  # joins the chat
    assert take_question({"question": "   "}, fresh={})["answer"] == "Please ask a question."
    assert "too long" in take_question({"question": "why " * 30_000}, fresh={})["answer"]


def test_passages_reducer_keeps_first_reading() -> None:
    merged = merge_passages([{"id": 1}, {"id": 2}], [{"id": 2}, {"id": 3}])
    assert [p["id"] for p in merged] == [1, 2, 3]


def test_platt_fit_recovers_a_known_mapping() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(0, 2, 4000)
    y = (rng.random(4000) < 1 / (1 + np.exp(-(1.5 * x - 0.5)))).astype(int)
    platt = fit_platt(x.tolist(), y.tolist())
    assert platt.a == pytest.approx(1.5, abs=0.15) and platt.b == pytest.approx(-0.5, abs=0.15)
    assert sigmoid(logit(0.8)) == pytest.approx(0.8)
    assert Platt()(logit(0.3)) == pytest.approx(0.3)


def test_damaged_calibration_falls_back_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    path.write_text("{broken")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calibration = Calibration.load(path)
    assert any(str(path) in str(w.message) for w in caught)
    assert calibration.platt == {}
    good = Calibration(platt={"rel": Platt(8.0, -4.0)})
    good.save(path)
    assert Calibration.load(path).platt["rel"] == Platt(8.0, -4.0)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.e2e)])
def cache_home(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """Settings whose QA caches are SQLite files in a private home, or rows in the
    session's PostgreSQL server: the same tests hold for both stores."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else ""
    return Settings(home=tmp_path, postgres_url=url)


def _index_name() -> str:
    """An index name of its own, so that tests sharing one database never meet."""
    return f"test-{uuid.uuid4().hex[:12]}"


class _Fixed:
    """A deterministic stand-in vector: these tests are about storage, not meaning."""

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32) / 2


def _fixed_cache(home: str | Path, url: str, index: str) -> QACache:
    """A QA cache with `_Fixed` vectors, opened as a process of its own would."""
    settings = Settings(home=Path(home), postgres_url=url)
    return QACache.open(settings, index, "fp", _Fixed())  # type: ignore[arg-type]


def test_qa_cache_survives_restart_and_never_serves_a_stale_corpus(
    cache_home: Settings, embedder
) -> None:
    index = _index_name()
    cache = QACache.open(cache_home, index, "fp-1", embedder)
    cache.put("Who founded Velloway Ironworks?", "Odile Farrengast", [6])
    cache.close()
    reopened = QACache.open(cache_home, index, "fp-1", embedder)
    hit = reopened.exact("who founded velloway ironworks")
    assert hit is not None and hit.answer == "Odile Farrengast" and hit.passage_ids == [6]
    similar = reopened.similar("Who was the founder of Velloway Ironworks?")
    assert similar and similar[0]["answer"] == "Odile Farrengast"
    assert reopened.similar("What is the boiling point of water?") == []
    changed = QACache.open(cache_home, index, "fp-2", embedder)  # the corpus changed
    assert changed.exact("Who founded Velloway Ironworks?") is None
    assert changed.similar("Who founded Velloway Ironworks?") == []
    assert changed.stats()["stale_entries"] == 1 and changed.stats()["entries"] == 0
    other = QACache.open(cache_home, _index_name(), "fp-1", embedder)  # another index
    assert other.exact("Who founded Velloway Ironworks?") is None
    assert other.stats()["entries"] == other.stats()["stale_entries"] == 0
    assert reopened.clear() == 1 and changed.stats()["stale_entries"] == 0
    for opened in (reopened, changed, other):
        opened.close()


def test_qa_cache_entries_die_with_their_passages(cache_home: Settings, embedder) -> None:
    """A passage found hostile takes the entries answered from it along (`hoprag cache
    forget`), and a changed corpus takes every entry of the old one (`hoprag index`)."""
    index = _index_name()
    cache = QACache.open(cache_home, index, "fp-1", embedder)
    cache.put("Who founded Velloway Ironworks?", "Odile Farrengast", [6, 17])
    cache.put("Where is Velloway Ironworks?", "Brisk Hollow", [6])
    cache.put("Which river flows through Brisk Hollow?", "Ulden River", [1])
    other = QACache.open(cache_home, _index_name(), "fp-1", embedder)  # another index
    other.put("Who founded Velloway Ironworks?", "Odile Farrengast", [17])
    assert cache.forget_passage(17) == 1 and cache.forget_passage(7) == 0
    assert cache.exact("Who founded Velloway Ironworks?") is None
    assert cache.exact("Where is Velloway Ironworks?") is not None
    assert other.stats()["entries"] == 1  # another index's entries are its own
    changed = QACache.open(cache_home, index, "fp-2", embedder)  # the corpus changed
    changed.put("Who founded Velloway Ironworks?", "Odile Farrengast", [6])
    assert changed.prune() == 2
    assert changed.stats()["stale_entries"] == 0 and changed.stats()["entries"] == 1
    assert cache.stats()["entries"] == 0 and other.stats()["entries"] == 1
    for opened in (cache, other, changed):
        opened.close()


def _writer(home: str, url: str, index: str, worker: int, n: int) -> None:
    cache = _fixed_cache(home, url, index)
    for i in range(n):
        cache.put(f"Question {worker}-{i}?", f"answer {worker}-{i}", [worker, i])
    cache.close()


def _spawn(target: Any, *args: Any) -> int:
    """Run `target(*args)` in a fresh process (its own connection); its exit code."""
    proc = multiprocessing.get_context("spawn").Process(target=target, args=args)
    proc.start()
    proc.join(timeout=120)
    return proc.exitcode if proc.exitcode is not None else -1


def test_qa_cache_is_safe_with_concurrent_writers(cache_home: Settings) -> None:
    index = _index_name()
    args = (str(cache_home.home), cache_home.postgres_url, index)
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_writer, args=(*args, w, 40)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(timeout=120)
        assert p.exitcode == 0
    cache = _fixed_cache(*args)
    assert cache.stats()["entries"] == 160
    for worker in range(4):
        for i in range(40):
            hit = cache.exact(f"question {worker}-{i}")
            assert hit is not None and hit.answer == f"answer {worker}-{i}"
            assert hit.passage_ids == [worker, i]
    cache.close()


def test_a_qa_cache_file_locked_while_opening_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite can refuse a WAL switch at once while another process sets the same new
    file up (a flaky CI run showed it); opening retries instead of calling it damaged."""
    set_up = SqliteStore._set_up
    refusals = iter([True, True, False])

    def refuse_twice(store: SqliteStore) -> None:
        if next(refusals):
            raise sqlite3.OperationalError("database is locked")
        set_up(store)

    monkeypatch.setattr(SqliteStore, "_set_up", refuse_twice)
    store = SqliteStore(tmp_path / "cache.sqlite")
    assert store.rows("any fingerprint") == []
    store.close()
    assert next(refusals, "all used") == "all used"


def test_a_qa_cache_file_locked_for_too_long_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(store: SqliteStore) -> None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(SqliteStore, "_set_up", refuse)
    monkeypatch.setattr("app.index.qa_store.SQLITE_BUSY_S", 0.2)
    with pytest.raises(UserError, match="stayed locked") as caught:
        SqliteStore(tmp_path / "cache.sqlite")
    assert "damaged" not in str(caught.value)


def _reader(home: str, url: str, index: str) -> None:
    """Another process: looks a sub-question up, counts the lookup; exit code 0 on a hit
    with the answer the first process stored."""
    cache = _fixed_cache(home, url, index)
    hit = cache.exact("Who founded Velloway Ironworks?")
    cache.record_lookup("exact" if hit else "miss")
    cache.close()
    raise SystemExit(0 if hit and hit.answer == "Odile Farrengast" else 1)


def test_two_processes_share_qa_cache_hits(cache_home: Settings) -> None:
    index = _index_name()
    args = (str(cache_home.home), cache_home.postgres_url, index)
    assert _spawn(_reader, *args) == 1  # nothing cached yet: a miss
    cache = _fixed_cache(*args)
    cache.put("Who founded Velloway Ironworks?", "Odile Farrengast", [6])
    assert _spawn(_reader, *args) == 0  # the other process sees this one's answer
    stats = cache.stats()  # ... and this one its lookups
    assert (stats["lookups"], stats["hits"], stats["by_outcome"]) == (
        2,
        1,
        {"miss": 1, "exact": 1},
    )
    cache.close()


def test_a_qa_cache_database_that_does_not_answer_is_one_clear_error(tmp_path: Path) -> None:
    dead = f"postgresql://hoprag:s3cret@127.0.0.1:{free_port()}/hoprag"
    with pytest.raises(ServiceError, match="Postgres QA cache database") as caught:
        _fixed_cache(tmp_path, dead, "sample")
    assert "s3cret" not in str(caught.value) and "hoprag:***@" in str(caught.value)


def test_the_postgres_qa_cache_reconnects_once_after_a_dropped_connection(
    tmp_path: Path, postgres_url: str
) -> None:
    import psycopg

    cache = _fixed_cache(tmp_path, postgres_url, _index_name())
    cache.put("Who founded Velloway Ironworks?", "Odile Farrengast", [6])
    backend = cache.store.conn.info.backend_pid  # type: ignore[attr-defined]
    with psycopg.connect(postgres_url, autocommit=True) as admin:  # as a restart would
        admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
    hit = cache.exact("Who founded Velloway Ironworks?")
    assert hit is not None and hit.answer == "Odile Farrengast"
    assert cache.store.conn.info.backend_pid != backend  # type: ignore[attr-defined]
    cache.close()


def test_dropping_an_index_drops_its_rows_of_the_shared_qa_cache(
    tmp_path: Path, postgres_url: str
) -> None:
    from app.index.store import drop_index

    settings = Settings(home=tmp_path, postgres_url=postgres_url)
    dropped, kept = _index_name(), _index_name()
    (settings.indexes_dir / dropped).mkdir(parents=True)
    for index in (dropped, kept):
        cache = _fixed_cache(tmp_path, postgres_url, index)
        cache.put("Who founded Velloway Ironworks?", "Odile Farrengast", [6])
        cache.close()
    drop_index(settings, dropped)
    assert not (settings.indexes_dir / dropped).exists()
    for index, entries in ((dropped, 0), (kept, 1)):
        cache = _fixed_cache(tmp_path, postgres_url, index)
        assert cache.stats()["entries"] == entries
        cache.close()


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [  # pairs that embedding similarity and DM_same both took for one question in dev runs
        ("Where was Edadil Kadin born?", "When was Edadil Kadin born?", False),
        (
            "Who was the second president of Indonesia?",
            "Who was the president of Indonesia?",
            False,
        ),
        (
            "In which county is Johnson Hagood born?",
            "In which state is Johnson Hagood born?",
            False,
        ),
        (
            "Who is the spouse of the actor who plays Marty's girlfriend in Back to the Future?",
            "Who plays Marty's girlfriend in Back to the Future?",
            False,
        ),
        # rewordings that may share an answer
        ("What is the name of Jack Clay's employer?", "Who is Jack Clay's employer?", True),
        ("What year was Jack Clay born?", "When was Jack Clay born?", True),
        (
            "What is the name of the river that Umchabezi River serves as the mouth of?",
            "What river does Umchabezi River serve as the mouth of?",
            True,
        ),
    ],
)
def test_cached_answers_are_offered_only_for_the_same_ask(
    first: str, second: str, same: bool
) -> None:
    assert may_share_an_answer(first, second) is same


class _SaysSame:
    """A DM that would take any two questions for one: only the rule can refuse."""

    def __init__(self) -> None:
        self.calls = 0

    def p_same(self, first: str, second: str) -> float:
        self.calls += 1
        return 1.0

    def backend(self, kind: str) -> str:
        return "llm"


def test_cache_lookup_refuses_another_ask_without_a_dm_call(tmp_path: Path, embedder) -> None:
    cache = QACache.open(Settings(home=tmp_path), "sample", "fp", embedder)
    cache.put("When was Edadil Kadin born?", "1845", [3])
    dm = _SaysSame()
    state = {"sub_question": "Where was Edadil Kadin born?", "hop": 2}
    update = lookup_qa_cache(state, Runtime(), cache=cache, dm=dm)  # type: ignore[arg-type]
    assert update["cache_hit"] is None and dm.calls == 0
    assert [(d["backend"], d["outcome"]) for d in update["decisions"]] == [("rule", False)]
    state = {"sub_question": "What year was Edadil Kadin born?", "hop": 2}
    update = lookup_qa_cache(state, Runtime(), cache=cache, dm=dm)  # type: ignore[arg-type]
    assert update["cache_hit"]["answer"] == "1845" and update["cache_hit"]["how"] == "similar"
    assert dm.calls == 1 and update["decisions"][0]["backend"] == "llm"


class _Recorder:
    """A reader that answers "yes" and keeps every system message it was sent."""

    def __init__(self) -> None:
        self.systems: list[str] = []

    def invoke(self, messages: list[Any], max_tokens: int | None = None) -> str:
        self.systems.append(messages[0].content)
        return "yes"


@pytest.mark.parametrize(
    ("question", "yes_no"),
    [
        ('Are both "Cooking Light" and "Vibe" magazines?', True),
        ("Did Marian Hillar and John Henry Caldwell share the same nationality?", True),
        ("Were The Bomb and Rolling Papers released in the same year?", True),
        (DEMO_QUESTION, False),
        ("Who is the spouse of Will Arnett?", False),
        ("Island Records signed which band first?", False),
    ],
)
def test_readers_ask_for_yes_or_no_only_where_the_question_does(
    question: str, yes_no: bool
) -> None:
    reader = _Recorder()
    row = {"sub_question": "What is Vibe?", "answer": "a magazine", "passage_ids": [1]}
    read_passages(reader, question, PASSAGES)  # type: ignore[arg-type]
    read_facts_and_passages(reader, question, [row], PASSAGES)  # type: ignore[arg-type]
    for system in reader.systems:
        assert ("reply yes or no." in system) is yes_no
        # Other questions see the prompt exactly as it was before the line existed.
        assert ("few words.\nDo not explain" in system) is not yes_no


def test_sub_question_rejections() -> None:
    state = {
        "question": "What team's player had the most league sacks?",
        "qa_table": [
            {
                "sub_question": "Who had the most league sacks?",
                "answer": "Reggie White",
                "passage_ids": [1],
                "source": "retrieved",
            }
        ],
        "unanswerable": ["When was Reggie White born?"],
    }
    assert "whole question" in rejection("Which team's player had the most league sacks?", state)
    # A repeat of an answered step is told what it found, so the retry can move on.
    repeat = rejection("who had the most league sacks", state)
    assert "already answered: Reggie White" in repeat and "naming Reggie White" in repeat
    assert "found no answer" in rejection("When was Reggie White born?", state)
    assert rejection("", state)
    assert rejection("Which team did Reggie White play for?", state) == ""
    # A first step may share much of the question's wording and still be one hop.
    grandfather = {"question": "Who is the paternal grandfather of Fakhr al-Dawla?"}
    assert rejection("Who is the father of Fakhr al-Dawla?", grandfather) == ""
    assert "whole question" in rejection(
        "Who was Fakhr al-Dawla's paternal grandfather?", grandfather
    )
    # A long name repeated is not the question repeated: what it asks is what counts.
    in_law = {"question": "Who is Princess Elisabeth, Duchess Of Hohenberg's father-in-law?"}
    assert rejection("Who is the spouse of Princess Elisabeth, Duchess Of Hohenberg?", in_law) == ""
    assert "whole question" in rejection(
        "Who is the father-in-law of Princess Elisabeth, Duchess Of Hohenberg?", in_law
    )


def test_a_sub_question_that_names_nothing_is_refused() -> None:
    """Steps from the traces that named nothing and found nothing, against descriptions
    as full as the question's own, which may be asked."""
    college = {
        "question": "Where did the person who sponsored the resolution to reopen trade "
        "with Vietnam along with Kerry go to college?"
    }
    for vague in ("What is the name of the college?", "Where is the college located?"):
        assert "does not say which one" in rejection(vague, college)
    assert rejection("Who sponsored the resolution to reopen trade with Vietnam?", college) == ""
    sacks = {"question": "What team's player had the most league sacks?"}
    assert rejection("Who was the player with the most league sacks?", sacks) == ""
    assert rejection("When was the 2017 film released?", sacks) == ""  # a number names it
    # A step that points back is the guard's to name once the table can.
    state = {
        "question": "In which county is the capital of the state where Johnson Hagood died?",
        "qa_table": [
            {
                "sub_question": "Where did Johnson Hagood die?",
                "answer": "South Carolina",
                "passage_ids": [1],
                "source": "retrieved",
            }
        ],
    }
    assert rejection("What is the capital of that state?", state) == ""
    assert "does not say which one" in rejection("What is the state's capital?", state)
    # A question typed in lower case has no names to tell apart from words.
    lower = {"question": "where did the author of the iliad die?"}
    assert rejection("who is the author of the iliad?", lower) == ""


def test_an_answered_description_is_put_in_the_question_in_its_place() -> None:
    """Pairs from the traces where the writer repeated an answered step."""
    assert (
        answer_in_place(
            "What film features Anil Devgan's sibling?",
            "What is the name of Anil Devgan's sibling?",
            "Ajay Devgan",
        )
        == "What film features Ajay Devgan?"
    )
    assert (
        answer_in_place(
            "Where does the river by the city sharing a border with Elizabeth Berg's "
            "birthplace empty into the Gulf of Mexico?",
            "What is the name of the city sharing a border with Elizabeth Berg's birthplace?",
            "Windhoek",
        )
        == "Where does the river by Windhoek empty into the Gulf of Mexico?"
    )
    assert (
        answer_in_place(
            "What is the birthplace of Anil Devgan's sibling's wife?",
            "Who is Anil Devgan's sibling?",
            "Ajay Devgan",
        )
        == "What is the birthplace of Ajay Devgan's wife?"
    )
    # Not the same description: the father is not the paternal grandfather, and the
    # 1894-95 FA Cup is not its winner. The question stays as it is.
    grandfather = "Who is the paternal grandfather of Fakhr al-Dawla?"
    assert answer_in_place(grandfather, "Who is the father of Fakhr al-Dawla?", "X") == grandfather
    winner = "When was the 1894-95 FA Cup winner founded?"
    assert answer_in_place(winner, "Who won the 1894-95 FA Cup?", "Aston Villa") == winner
    # A date is no entity to ask on about.
    same_year = "Were The Bomb and Rolling Papers released in the same year?"
    dated = [{"sub_question": "When was Rolling Papers released?", "answer": "1900"}]
    assert with_answers_in_place(same_year, dated) == same_year  # type: ignore[arg-type]
    # The writer that repeats an answered step is shown the question so reduced.
    state = {
        "question": "Who married the actor from Terminator?",
        "qa_table": [
            {
                "sub_question": "Who was the actor from Terminator?",
                "answer": "Arnold Schwarzenegger",
            }
        ],
    }
    hint = rejection("Who was the actor from Terminator?", state)  # type: ignore[arg-type]
    assert "already answered: Arnold Schwarzenegger" in hint
    assert "reads: Who married Arnold Schwarzenegger?" in hint


def test_the_trace_shows_which_sub_questions_were_refused_and_why() -> None:
    # (said so that no relation chain plans it: see the test after this one)
    question = "Who is the grandfather of Fakhr al-Dawla on his father's side?"
    whole = "Who was Fakhr al-Dawla's grandfather on his father's side?"
    father = "Who is the father of Fakhr al-Dawla?"

    def write(state: dict, *replies: str, mode: str = "write") -> dict:
        return write_sub_question(
            state,  # type: ignore[arg-type]
            Runtime(Settings(sub_questions=mode)),  # type: ignore[arg-type]
            gateway=ScriptedWriter(*replies),  # type: ignore[arg-type]
            examples=NoExamples(),  # type: ignore[arg-type]
        )

    # A first step that rewords the question is replaced by the plan's first askable step.
    planned = write({"question": question, "hop": 0}, whole, f"1. {whole}\n2. {father}")
    assert planned["sub_question"] == father and planned["written_by"] == "decomposition"
    assert [r["sub_question"] for r in planned["rejected"]] == [whole]
    assert "whole question" in planned["rejected"][0]["reason"]
    # A plan step that needs an earlier answer ("#1", "that person") cannot come first.
    # With no other first step either, the question is taken to be one hop: it is asked.
    plan = "1. Who was that person's father?\n2. Who was #1's father?"
    one_hop = write({"question": question, "hop": 0}, whole, plan)
    assert one_hop["sub_question"] == question and len(one_hop["rejected"]) == 3
    assert one_hop["written_by"] == "the question itself"
    # Asked so and found no answer, it is not asked again: the writer is told why.
    tried = {"question": question, "hop": 1, "sub_question": question, "unanswerable": [question]}
    again = write(tried, plan, whole, father)
    assert again["sub_question"] == father and again["written_by"] == "writer, told why"
    # A first try refused for another reason is retried, told why.
    retried_first = write({"question": question, "hop": 0}, "", plan, father)
    assert retried_first["sub_question"] == father
    assert retried_first["written_by"] == "writer, told why"
    # Later steps take the plan's next step, with the answer put in for "#1", before
    # another writer call; the plan is made once and kept for the later steps.
    row = {"sub_question": "Who is the son of Adud al-Dawla?", "answer": "Fakhr al-Dawla"}
    later = {"question": question, "hop": 1, "qa_table": [row]}
    plan = "1. Who is the son of Adud al-Dawla?\n2. Who is the father of #1?"
    planned_later = write(later, whole, plan)
    assert planned_later["sub_question"] == father
    assert planned_later["written_by"] == "decomposition" and len(planned_later["rejected"]) == 1
    assert planned_later["plan"] == ["Who is the son of Adud al-Dawla?", "Who is the father of #1?"]
    # Once made, the plan's next askable step comes before any writer call (none scripted).
    kept = write({**later, "plan": planned_later["plan"]})
    assert kept["sub_question"] == father and kept["written_by"] == "decomposition"
    assert kept["rejected"] == [] and kept["plan_step"] == 2
    # With the plan spent, the writer is asked once more, told why (no plan call again).
    answered = {"sub_question": father, "answer": "Buyid"}
    kept_plan = {**later, "qa_table": [row, answered], "plan": planned_later["plan"]}
    dynasty = "Which dynasty did Fakhr al-Dawla belong to?"
    told = write(kept_plan, whole, dynasty)
    assert told["sub_question"] == dynasty and told["written_by"] == "writer, told why"
    gave_up = write(kept_plan, whole, whole)
    assert gave_up["sub_question"] == "" and gave_up["written_by"] == ""
    reasons = [r["reason"] for r in gave_up["rejected"]]
    assert reasons[1:3] == ["no askable step"] * 2 and "whole question" in reasons[3]
    # Plan first: the decomposition, made at the first step, gives each next step with no
    # writer call; the writer is asked only where no planned step can be.
    plan = f"1. {whole}\n2. Who is the son of Adud al-Dawla?\n3. Who is the father of #2?"
    first = write({"question": question, "hop": 0}, plan, mode="plan")
    assert first["sub_question"] == "Who is the son of Adud al-Dawla?"
    assert first["written_by"] == "decomposition" and first["rejected"] == []
    after = {**later, "qa_table": [row, row], "plan": first["plan"]}
    assert write(after, mode="plan")["sub_question"] == "Who is the father of Fakhr al-Dawla?"
    exhausted = {**later, "qa_table": [row, row, answered], "plan": first["plan"]}
    by_writer = write(exhausted, "Which dynasty did Fakhr al-Dawla belong to?", mode="plan")
    assert by_writer["written_by"] == "writer"
    # A planned step is asked once: "Who was his father?", which the guard reworded and
    # which found nothing, is not planned again (the writer is asked instead).
    pointing = ["Who is the son of Adud al-Dawla?", "Who was his father?"]
    taken = write({**later, "plan": pointing}, mode="plan")
    assert taken["sub_question"] == "Who was his father?" and taken["plan_step"] == 2
    unanswered = {**later, "plan": pointing, "plan_step": 2, "unanswerable": [father]}
    assert write(unanswered, "Who was Adud al-Dawla?", mode="plan")["written_by"] == "writer"
    # After a step that found no answer the plan is made at once, before any writer
    # call (one reply scripted: a writer call first would take it and fail).
    failed = {**later, "sub_question": father, "unanswerable": [father]}
    grandfather = "Who is the father of Adud al-Dawla?"
    plan = f"1. Who is the son of Adud al-Dawla?\n2. {father}\n3. {grandfather}"
    replanned = write(failed, plan)
    assert replanned["sub_question"] == grandfather and replanned["rejected"] == []
    assert replanned["written_by"] == "decomposition" and replanned["plan_step"] == 3


def test_an_answer_that_repeats_its_question_is_no_answer() -> None:
    assert echoes_question("In which town is Brisk Hollow?", "Brisk Hollow")
    assert echoes_question("Who was Arnold Schwarzenegger's wife?", "Arnold Schwarzenegger")
    assert not echoes_question("Which river flows through Brisk Hollow?", "Ulden River")
    assert not echoes_question("Who was born first, Ann Lee or Bo Ray?", "Ann Lee")
    state = {
        "question": "Which river flows through the town where Brisk Hollow is?",
        "sub_question": "In which town is Brisk Hollow?",
        "sub_answer": "Brisk Hollow.",
    }
    assert update_qa_table(state, cache=None) == {
        "unanswerable": ["In which town is Brisk Hollow?"]
    }
    # A name the question itself gives is no step's finding either (from a trace).
    film = "What is the name of the film in which Kurt Russell also plays a character?"
    cast = {
        "question": 'This cast member in "Search for the Gods" also plays in which film?',
        "sub_question": film,
        "sub_answer": "Search for the Gods",
    }
    assert update_qa_table(cast, cache=None) == {"unanswerable": [film]}
    assert update_qa_table({**cast, "sub_answer": "The Hateful Eight"}, cache=None)["qa_table"]


def test_a_switched_off_decision_says_no_without_any_model() -> None:
    off = Calibration(backends=dict.fromkeys(("rel", "direct", "depth", "suff", "same"), "off"))
    dm = DecisionModel(gateway=None, embedder=None, calibration=off)  # type: ignore[arg-type]
    assert dm.p_direct("Q?", PASSAGES) == 0.0 and dm.p_same("A?", "B?") == 0.0
    assert dm.p_rel("Q?", PASSAGES) == [0.0] * len(PASSAGES)


def test_a_new_turn_clears_the_last_one_but_keeps_the_chat() -> None:
    """A thread keeps its state between runs: the next turn must not start with the last
    turn's QA table, hop count, decisions or notes (lists with reducers are overwritten)."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.types import Overwrite

    from graph.state import DeftState, fresh_turn

    fresh = fresh_turn(DeftState)
    assert "messages" not in fresh and "question" not in fresh
    # the QA table and the hop count have reducers too (a comparison's parallel steps)
    assert fresh["hop"] == Overwrite(0) and fresh["qa_table"] == Overwrite([])
    assert fresh["notes"] == Overwrite([]) and fresh["answer"] == ""
    last_turn = {
        "messages": [HumanMessage("Who founded X?"), AIMessage("Ann"), HumanMessage("and Y?")],
        "question": "Who founded X?",
        "hop": 3,
        "qa_table": [{"sub_question": "Who founded X?", "answer": "Ann", "passage_ids": []}],
        "answer": "Ann",
    }
    update = take_question(last_turn, fresh=fresh)
    assert update["question"] == "and Y?"  # the chat message just sent, not the old field
    assert "messages" not in update  # it is in the chat already
    assert update["hop"] == Overwrite(0) and update["qa_table"] == Overwrite([])
    assert update["answer"] == ""
    assert "decisions" not in update  # only what the thread holds is cleared


class _SaysDirect:
    """A DM sure that every question is shallow and its passages suffice."""

    calls = 0
    retrieval: list[float] | None = None

    def p_shallow(self, question: str) -> float:
        self.calls += 1
        return 0.9

    def p_direct(self, question: str, passages: list, retrieval: list | None = None) -> float:
        self.calls += 1
        self.retrieval = retrieval
        return 0.9

    def backend(self, kind: str) -> str:
        return "trained"


@pytest.mark.parametrize(("direct_answer", "direct", "calls"), [(True, True, 2), (False, False, 0)])
def test_the_direct_answer_is_a_setting(direct_answer: bool, direct: bool, calls: int) -> None:
    dm = _SaysDirect()
    signals = [0.03, 0.002, 11.5]
    state = {
        "question": "Where is Brisk Hollow?",
        "question_passages": PASSAGES,
        "question_retrieval": signals,
    }
    update = check_direct_answer(state, Runtime(Settings(direct_answer=direct_answer)), dm=dm)  # type: ignore[arg-type]
    assert update["direct"] is direct and dm.calls == calls
    assert dm.retrieval == (signals if calls else None)  # DM_direct reads how retrieval went
    assert [d["kind"] for d in update.get("decisions", [])] == ["depth", "direct"][:calls]


class _JudgesRelevance(_SaysDirect):
    """Relevance to the whole question: only the first hop's passage is relevant."""

    def __init__(self) -> None:
        self.whole_question: list[bool] = []  # per call

    def p_rel(
        self, question: str, passages: list, stored: bool = True, whole_question: bool = False
    ) -> list[float]:
        self.whole_question.append(whole_question)
        return [0.9 if p["title"] == "Tavistrom College" else 0.1 for p in passages]


class _OneSentencePassages:
    """An index whose passages are stored without sentences: each is read as one."""

    def sentences_of(self, passage_id: int) -> list[str]:
        return []


def test_the_direct_answer_reads_the_passages_a_relevant_one_names() -> None:
    passages = [
        {"id": 1, "title": "Tavistrom College", "text": "A college in Brisk Hollow."},
        {"id": 2, "title": "Dunmere College", "text": "A college on the Brask River."},
        {"id": 3, "title": "Brisk Hollow (town)", "text": "A town on the Ulden River."},
        {"id": 4, "title": "Ulden River", "text": "A river."},
    ]
    state = {
        "question": "Which river flows by Tavistrom College's town?",
        "question_passages": passages,
    }
    reader = ScriptedWriter('Answer: "Ulden River".')
    dm = _JudgesRelevance()
    update = answer_directly(
        state,
        Runtime(),  # type: ignore[arg-type]
        dm=dm,  # type: ignore[arg-type]
        gateway=reader,  # type: ignore[arg-type]
        index=_OneSentencePassages(),  # type: ignore[arg-type]
    )
    # judged against the question, with the batch's links; then its sentences are chosen
    assert dm.whole_question == [True, False]
    # one passes: the top 2 (keep rules), then the town the college's text names; the
    # river, named only by the town's passage, is two links away
    assert update["answer_passage_ids"] == [1, 2, 3]
    # the reader is shown those three, and not the river's own passage
    assert "[3] Brisk Hollow (town): A town on the Ulden River." in reader.last
    assert "[4]" not in reader.last and "A river." not in reader.last
    assert update["answer"] == "Ulden River"  # its reply, cleaned


@pytest.mark.parametrize(
    "question",
    [
        "Who was born first, Ann Lee or Bo Ray?",
        "Are Ann Lee and Bo Ray of the same nationality?",
        "Who is Ann Lee's maternal grandmother?",  # a relation chain: walked step by step
    ],
)
def test_questions_the_rules_walk_never_go_direct(question: str) -> None:
    dm = _SaysDirect()
    state = {"question": question, "question_passages": PASSAGES}
    update = check_direct_answer(state, Runtime(Settings(direct_answer=True)), dm=dm)  # type: ignore[arg-type]
    assert update["direct"] is False and dm.calls == 0
    assert [(d["kind"], d["backend"], d["outcome"]) for d in update["decisions"]] == [
        ("direct", "rule", False)
    ]


def _row(sub_question: str, answer: str, pid: int) -> dict[str, Any]:
    return {"sub_question": sub_question, "answer": answer, "passage_ids": [pid]}


TERMINATOR = "Who married the actor from Terminator?"
IN_PLACE = "Who married Arnold Schwarzenegger?"
TERMINATOR_ROWS = [_row("Who was the actor from Terminator?", "Arnold Schwarzenegger", 1)]
SHRIVER = [
    {"id": 1, "title": "Arnold Schwarzenegger", "text": "He ran for re-election in 2006."},
    {"id": 2, "title": "Chrétien DuBois", "text": "Maria Shriver (wife of Schwarzenegger)."},
]


def test_a_fallback_answer_that_repeats_the_question_is_read_again_without_its_passages() -> None:
    reader = ScriptedWriter("Maria Shriver")
    answer, echo = read_past_an_echo(
        reader,  # type: ignore[arg-type]
        IN_PLACE,
        TERMINATOR,
        TERMINATOR_ROWS,
        SHRIVER,
        "Arnold Schwarzenegger",
    )
    assert (answer, echo) == ("Maria Shriver", "Arnold Schwarzenegger")
    assert "Chrétien DuBois" in reader.last and "re-election" not in reader.last
    assert f"Question: {IN_PLACE}" in reader.last


@pytest.mark.parametrize(
    ("answer", "passages", "second_read"),
    [
        ("Maria Shriver", SHRIVER, None),  # no echo: no second read
        ("Arnold Schwarzenegger", SHRIVER[1:], None),  # no passage about the name
        ("Arnold Schwarzenegger", SHRIVER, "unknown"),  # the second read finds nothing
        ("Arnold Schwarzenegger", SHRIVER, "Schwarzenegger"),  # ... or echoes again
    ],
)
def test_a_fallback_answer_stays_unless_a_second_read_finds_another(
    answer: str, passages: list[dict[str, Any]], second_read: str | None
) -> None:
    reader = ScriptedWriter(*([second_read] if second_read else []))  # no reply: no call
    assert read_past_an_echo(
        reader,  # type: ignore[arg-type]
        IN_PLACE,
        TERMINATOR,
        TERMINATOR_ROWS,
        passages,
        answer,
    ) == (answer, "")
    assert not reader.replies
