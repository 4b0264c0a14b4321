"""Index builds: real spaCy, MiniLM, Chroma and bm25s; incremental and atomic."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.checks import list_indexes
from app.errors import UserError
from app.index.indexing import build_index
from app.index.store import CorpusIndex
from app.settings import Settings
from tests.conftest import SAMPLE_CORPUS


def _corpus(tmp_path: Path, extra: list[dict[str, str]]) -> Path:
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(json.loads(SAMPLE_CORPUS.read_text()) + extra))
    return path


NEW_DOC = {
    "title": "Quillon Ferry",
    "text": "The Quillon Ferry crosses the Ulden River. It was launched by Mara Zentek in 1931.",
}


def test_sample_index_contents(settings: Settings, sample_index: str) -> None:
    index = CorpusIndex.open(settings, sample_index)
    m = index.manifest
    assert m["passages"] == 24 and m["sentences"] >= 72 and m["entities"] > 20
    assert m["embedding_model"].endswith("all-MiniLM-L6-v2")
    assert index.collection.count() == 24
    assert index.passages([14, 6])[0].title == "Odile Farrengast"
    assert index.sentences_of(14)[1] == "Odile Farrengast was born in the town of Oskelund."
    labels = dict(index.db.execute("SELECT name, label FROM entities").fetchall())
    assert labels["oskelund"] == "GPE"  # a town, in its one mention
    # the label most of its mentions got: ORG in the first, PERSON in the other three
    assert labels["tavistrom college"] == "PERSON"


def test_unchanged_corpus_does_nothing(settings: Settings, sample_index: str) -> None:
    report = build_index(settings, SAMPLE_CORPUS, sample_index, progress=False)
    assert report.status == "unchanged"


def test_new_documents_are_added_without_recomputing_the_rest(
    settings: Settings, tmp_path: Path, embedder, ner, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_index(settings, SAMPLE_CORPUS, "grow", progress=False, embedder=embedder, ner=ner)
    analysed: list[int] = []
    original = ner.analyse

    def counting(texts, **kwargs):
        analysed.append(len(texts))
        return original(texts, **kwargs)

    monkeypatch.setattr(ner, "analyse", counting)
    report = build_index(
        settings, _corpus(tmp_path, [NEW_DOC]), "grow", progress=False, embedder=embedder, ner=ner
    )
    assert report.status == "updated"
    assert (report.new_passages, report.reused_passages) == (1, 24)
    assert analysed == [1]  # only the new passage went through spaCy
    index = CorpusIndex.open(settings, "grow")
    assert index.collection.count() == 25
    assert {pid for _, pid, _ in index.sentences_with("Mara Zentek")} == {24}
    # Reused analyses are identical to a fresh build of the same passages.
    fresh = CorpusIndex.open(settings, "sample")
    assert index.sentences_of(14) == fresh.sentences_of(14)
    assert index.sentences_with("Odile Farrengast") == fresh.sentences_with("Odile Farrengast")
    from tools.retriever import Retriever

    hits = Retriever(index, embedder).retrieve("Who launched the Quillon Ferry?", k=1)
    assert hits[0].id == 24


def test_editing_one_section_of_a_long_file_reanalyses_only_its_passages(
    settings: Settings, tmp_path: Path, embedder, ner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Documents re-index at passage level: one section changed in a long Markdown file
    sends only that section's passages through spaCy and the embedder; the others and
    every citation's source stay right."""
    sample = json.loads(SAMPLE_CORPUS.read_text())
    handbook = tmp_path / "docs" / "handbook.md"
    handbook.parent.mkdir()

    def write(river: str) -> None:
        sections = [f"## {p['title']}\n\n{p['text']}" for p in sample]
        sections[21] = sections[21].replace("Ulden River", river)  # Brisk Hollow's section
        handbook.write_text("# Regional handbook\n\n" + "\n\n".join(sections) + "\n")

    write("Ulden River")
    first = build_index(
        settings, handbook.parent, "long", progress=False, embedder=embedder, ner=ner
    )
    assert first.passages == len(sample)
    analysed: list[int] = []
    original = ner.analyse
    monkeypatch.setattr(
        ner, "analyse", lambda texts, **kw: analysed.append(len(texts)) or original(texts, **kw)
    )
    write("Marrow River")
    report = build_index(
        settings, handbook.parent, "long", progress=False, embedder=embedder, ner=ner
    )
    assert (report.new_passages, report.reused_passages) == (1, len(sample) - 1)
    assert analysed == [1]
    index = CorpusIndex.open(settings, "long")
    [edited] = index.passages([21])
    assert "Marrow River" in edited.text and edited.cite() == "handbook.md \u203a Brisk Hollow"
    assert edited.title == "Brisk Hollow"


def test_corrupt_index_is_reported(settings: Settings, embedder, ner) -> None:
    build_index(settings, SAMPLE_CORPUS, "broken", progress=False, embedder=embedder, ner=ner)
    (settings.indexes_dir / "broken" / "manifest.json").write_text("{not json")
    with pytest.raises(UserError, match="damaged"):
        CorpusIndex.open(settings, "broken")
    assert "broken" in list_indexes(settings)  # listed, so the user can see and drop it


def test_bad_names_and_unknown_index(settings: Settings) -> None:
    for bad in ["", "../escape", ".hidden", "a/b", "x" * 80]:
        with pytest.raises(UserError, match="not a valid index name"):
            build_index(settings, SAMPLE_CORPUS, bad, progress=False)
    with pytest.raises(UserError, match="no index named 'nope'"):
        CorpusIndex.open(settings, "nope")


def test_sqlite_is_consistent(settings: Settings, sample_index: str) -> None:
    db = sqlite3.connect(settings.indexes_dir / sample_index / "hoprag.sqlite")
    orphans = db.execute(
        "SELECT COUNT(*) FROM mentions m LEFT JOIN sentences s "
        "ON s.id = m.sentence_id WHERE s.id IS NULL"
    ).fetchone()[0]
    assert orphans == 0
    dims = {len(row[0]) for row in db.execute("SELECT embedding FROM passages")}
    assert dims == {384 * 4}


def test_a_large_batch_is_analysed_in_worker_processes_with_the_same_result(
    ner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past SPACY_PARALLEL_FROM passages spaCy runs in one worker a core; each passage is
    still analysed alone, so sentences and entities are those of one process."""
    import app.index.nlp as nlp

    texts = [p["text"] for p in json.loads(SAMPLE_CORPUS.read_text())]
    alone = list(ner.analyse(texts))
    pipe = ner.nlp.pipe
    processes: list[int] = []

    def counted(*args, n_process: int = 1, **kwargs):
        processes.append(n_process)
        return pipe(*args, n_process=n_process, **kwargs)

    monkeypatch.setattr(nlp, "SPACY_PARALLEL_FROM", 8)
    monkeypatch.setattr(nlp.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(ner.nlp, "pipe", counted)
    assert list(ner.analyse(texts)) == alone
    assert processes == [2]
