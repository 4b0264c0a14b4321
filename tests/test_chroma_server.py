"""Scale-out vector store: dense search through a Chroma server (`chroma run` on
loopback) gives what the index's own Chroma folder gives."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.errors import ServiceError
from app.index.store import CorpusIndex
from app.llm.engine import free_port
from app.settings import Settings
from bench.services import chroma_server
from tools.retriever import Retriever

pytestmark = pytest.mark.e2e  # the real chat model, servers or the installed CLI

QUESTIONS = ["Who founded Velloway Ironworks?", "Which river flows through Brisk Hollow?"]


@pytest.fixture(scope="module")
def chroma_url() -> Iterator[str]:
    with chroma_server() as url:
        yield url


def test_dense_search_through_a_chroma_server_matches_the_local_store(
    settings: Settings, sample_index: str, embedder, chroma_url: str
) -> None:
    local = CorpusIndex.open(settings, sample_index)
    remote = CorpusIndex.open(settings.with_overrides(chroma_url=chroma_url), sample_index)
    assert remote.collection.count() == len(local)  # uploaded on first use
    for question in QUESTIONS:
        near = Retriever(local, embedder, "dense").dense(question, 5)
        far = Retriever(remote, embedder, "dense").dense(question, 5)
        assert [pid for pid, _ in far] == [pid for pid, _ in near]
        assert [s for _, s in far] == pytest.approx([s for _, s in near], abs=1e-4)
    again = CorpusIndex.open(settings.with_overrides(chroma_url=chroma_url), sample_index)
    assert again.collection.name == remote.collection.name  # found, not uploaded twice
    for index in (local, remote, again):
        index.close()


def test_a_chroma_server_that_does_not_answer_is_one_clear_error(
    settings: Settings, sample_index: str
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    index = CorpusIndex.open(settings.with_overrides(chroma_url=dead), sample_index)
    with pytest.raises(ServiceError, match=r"Chroma server .* does not answer"):
        _ = index.collection
    index.close()
