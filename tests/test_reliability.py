"""Faults and bad input, end to end: an endpoint that times out, a model server killed
mid-run (then resumed from the checkpoint), damaged index, cache and checkpoint files,
malformed commands, and a passage that tries to give the model orders."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from app.checkpoints import open_checkpointer
from app.errors import ServiceError, UserError
from app.llm import LLMGateway, free_port
from app.settings import Settings
from app.store import CorpusIndex
from tests.conftest import assert_user_error, run_cli

TWO_HOPS = "Which river flows through the town where Tavistrom College is located?"


@pytest.fixture
def silent_endpoint() -> Iterator[tuple[str, list[socket.socket]]]:
    """An endpoint that accepts connections and never answers; it keeps every one."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", accepted
    listener.close()
    for conn in accepted:
        conn.close()


def test_an_endpoint_that_times_out_is_retried_with_backoff_then_reported(
    settings: Settings, silent_endpoint: tuple[str, list[socket.socket]]
) -> None:
    url, accepted = silent_endpoint
    gateway = LLMGateway(
        settings.with_overrides(llm_base_url=url, llm_timeout_s=1.0, llm_max_retries=2)
    )
    start = time.monotonic()
    with pytest.raises(ServiceError, match=r"timed out: no reply within 1s in 3 attempts"):
        gateway.invoke([HumanMessage("hi")])
    assert len(accepted) == 3  # the first try and two retries
    assert time.monotonic() - start > 3.5  # three 1 s timeouts plus backoff pauses


def test_checkpointer_is_sqlite_by_default_and_postgres_when_configured(tmp_path: Path) -> None:
    with open_checkpointer(Settings(home=tmp_path)) as saver:
        assert type(saver).__name__ == "SqliteSaver"
    assert (tmp_path / "checkpoints.sqlite").is_file()
    url = f"postgresql://hoprag:s3cret@127.0.0.1:{free_port()}/hoprag"
    with (
        pytest.raises(ServiceError, match="Postgres checkpoint database") as caught,
        open_checkpointer(Settings(home=tmp_path, postgres_url=url)),
    ):
        pass
    assert "s3cret" not in str(caught.value) and "hoprag:***@" in str(caught.value)


def test_a_damaged_checkpoint_database_is_reported(tmp_path: Path) -> None:
    (tmp_path / "checkpoints.sqlite").write_bytes(b"\x00garbage" * 4096)
    with pytest.raises(UserError, match=r"checkpoint database .* is damaged"):
        open_checkpointer(Settings(home=tmp_path)).__enter__()


@pytest.fixture
def index_copy(settings: Settings, sample_index: str, tmp_path: Path) -> Settings:
    """A private home holding a copy of the sample index, to damage."""
    home = tmp_path / "home"
    shutil.copytree(settings.indexes_dir / sample_index, home / "indexes" / sample_index)
    (home / "models").symlink_to(settings.models_dir, target_is_directory=True)
    return Settings(home=home)


@pytest.mark.parametrize(
    ("name", "damage", "reported"),
    [
        ("hoprag.sqlite", lambda p: p.write_bytes(b"not a database" * 100), "hoprag.sqlite"),
        ("sentence_graph.npz", lambda p: p.write_bytes(p.read_bytes()[:100]), "checksum"),
        ("sentence_vectors.npy", lambda p: p.unlink(), "is missing"),
        ("manifest.json", lambda p: p.write_text("{"), "unreadable manifest"),
    ],
)
def test_a_damaged_index_file_is_detected(
    index_copy: Settings, sample_index: str, name: str, damage, reported: str
) -> None:
    damage(index_copy.indexes_dir / sample_index / name)
    with pytest.raises(UserError, match=f"damaged.*{reported}"):
        CorpusIndex.open(index_copy, sample_index)


def test_a_damaged_bm25_file_is_reported_by_the_cli(index_copy: Settings, sample_index: str):
    bm25 = next((index_copy.indexes_dir / sample_index / "bm25").iterdir())
    bm25.write_bytes(bm25.read_bytes()[::-1])
    proc = run_cli("ask", "Who founded Velloway Ironworks?", home=index_copy.home)
    assert_user_error(proc, "damaged", "does not match its checksum", "hoprag index")


def test_a_damaged_qa_cache_is_reported(index_copy: Settings, sample_index: str) -> None:
    cache = index_copy.indexes_dir / f"{sample_index}.qa_cache.sqlite"
    cache.write_bytes(b"\x01" * 8192)
    assert_user_error(run_cli("cache", "stats", home=index_copy.home), "QA cache", "damaged")
