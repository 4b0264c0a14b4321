"""Scale-out vector store: dense search through a Chroma server (`chroma run` on
loopback) gives what the index's own Chroma folder gives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.errors import ServiceError
from app.index.store import CorpusIndex
from app.llm.gateway import free_port
from app.settings import Settings
from tools.retriever import Retriever

pytestmark = pytest.mark.e2e  # the real chat model, servers or the installed CLI

CHROMA = str(Path(sys.executable).with_name("chroma"))
QUESTIONS = ["Who founded Velloway Ironworks?", "Which river flows through Brisk Hollow?"]


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    folder = tmp_path_factory.mktemp("chroma-server")
    proc = subprocess.Popen(
        [CHROMA, "run", "--path", str(folder / "data"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=(folder / "log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "chroma run failed"
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2):
                    break
            except OSError:
                time.sleep(0.3)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


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
