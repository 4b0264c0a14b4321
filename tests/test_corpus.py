"""Corpus reading: the three accepted shapes and every malformed input (documents in
detail: test_documents.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.errors import UserError
from app.index.corpus import Passage, fingerprint, load_corpus
from app.index.documents import Source
from tests.conftest import SAMPLE_CORPUS


def test_benchmark_json_keeps_positions_as_ids() -> None:
    passages = load_corpus(SAMPLE_CORPUS)
    raw = json.loads(SAMPLE_CORPUS.read_text())
    assert [p.id for p in passages] == list(range(len(raw)))
    assert passages[6].title == raw[6]["title"]


def test_jsonl_and_folder(tmp_path: Path) -> None:
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text('{"title": "A", "text": "alpha"}\n\n{"title": "B", "text": "beta"}\n')
    assert [(p.title, p.text) for p in load_corpus(jsonl)] == [("A", "alpha"), ("B", "beta")]

    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.md").write_text("# B\nbeta")
    (folder / "a.txt").write_text("alpha")
    (folder / "sub" / "c.txt").write_text("gamma")
    (folder / "notes.csv").write_text("not,a,document")
    passages = load_corpus(folder)
    assert [(p.title, p.source.file) for p in passages] == [
        ("a", "a.txt"),
        ("B", "b.md"),
        ("c", "sub/c.txt"),
    ]
    assert passages[1].text == "beta"


def test_fingerprint_tracks_content_and_order() -> None:
    a, b = Passage(0, "A", "x"), Passage(1, "B", "y")
    assert fingerprint([a, b]) == fingerprint([Passage(0, "A", "x"), Passage(1, "B", "y")])
    assert fingerprint([a, b]) != fingerprint([b, a])
    assert fingerprint([a]) != fingerprint([Passage(0, "A", "x!")])
    moved = Passage(0, "A", "x", Source("a.pdf", ("A",), page=2))
    assert fingerprint([moved]) != fingerprint([Passage(0, "A", "x", Source("a.pdf", ("A",)))])


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("missing.json", None, "does not exist"),
        ("empty.json", "[]", "empty"),
        ("blank.json", '[{"title": "A", "text": "  "}]', "empty"),
        ("broken.json", '[{"title": "A", "text": ', "not valid JSON"),
        ("dict.json", '{"title": "A"}', "not a list"),
        ("nofield.json", '[{"title": "A"}]', "missing field 'text'"),
        ("types.json", '[{"title": 1, "text": "x"}]', "must be strings"),
        ("rows.json", '["just a string"]', "expected an object"),
        ("bad.jsonl", '{"title": "A", "text": "x"}\nnot json\n', "line 2"),
        ("corpus.csv", "title,text\n", "not a corpus"),
    ],
)
def test_malformed_corpus_is_a_clear_error(
    tmp_path: Path, name: str, content: str | None, needle: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(UserError, match=needle):
        load_corpus(path)


def test_non_utf8_and_empty_folder(tmp_path: Path) -> None:
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"title": "Café", "text": "x"}'.encode("latin-1"))
    with pytest.raises(UserError, match="not UTF-8"):
        load_corpus(latin)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="holds no documents"):
        load_corpus(tmp_path / "empty")


def test_unreadable_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests run as root, for whom chmod 000 changes nothing; make the listing fail instead.
    def denied(self: Path, pattern: str):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "rglob", denied)
    with pytest.raises(UserError, match="permission denied"):
        load_corpus(tmp_path)
