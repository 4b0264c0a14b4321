"""bench.documents' gold matching: which passages indexed from the benchmark corpora
written as documents were cut from each gold passage. Wrong matches would put wrong gold
ids under the document runs' coverage figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.index.corpus import Passage, load_corpus
from app.settings import Settings
from bench.documents import gold_chunks, write_documents

SHARED = "According to the census bureau, the town has a total area of twelve square miles."
CORPUS = [
    {"title": "Brisk Hollow", "text": f"Brisk Hollow is a market town. {SHARED}"},
    {"title": "Ulden River", "text": "The Ulden River flows through Brisk Hollow."},
    {"title": "Ulden River", "text": "The Ulden River flows through Brisk Hollow."},  # twice
    {"title": "Wexley Ford", "text": f"{SHARED} Wexley Ford lies on the Brask River."},
    {
        "title": "Tavistrom College",
        "text": " ".join(
            f"Tavistrom College built hall number {n} in {1862 + n}." for n in range(40)
        ),
    },
]


class _Index:
    """What gold_chunks reads of an index: its passages by id."""

    def __init__(self, passages: list[Passage]) -> None:
        self._passages = passages

    def __len__(self) -> int:
        return len(self._passages)

    def passages(self, ids: list[int]) -> list[Passage]:
        return [self._passages[i] for i in ids]


@pytest.mark.parametrize("fmt", ["md", "txt"])
def test_each_indexed_passage_goes_to_the_corpus_passage_it_was_cut_from(
    tmp_path: Path, fmt: str
) -> None:
    write_documents(CORPUS, fmt, tmp_path, "bench")
    passages = load_corpus(tmp_path, Settings(chunk_words=40), warn=lambda _: None)
    chunks = gold_chunks(CORPUS, _Index(passages))
    assert sorted(chunks) == [0, 1, 2, 3, 4]
    for corpus_id, ids in chunks.items():
        text = " ".join(CORPUS[corpus_id]["text"].split())
        for pid in ids:
            assert passages[pid].text in text or text in passages[pid].text
    assert len(chunks[4]) == 8  # 320 words at 40: cut in eight
    if fmt == "md":  # one section, one passage: no passage twice
        assert sum(map(len, chunks.values())) == len(passages)
