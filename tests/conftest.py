"""Shared fixtures: a private HOPRAG_HOME per test session that reuses the provisioned
models (no re-download), the sample index built with the real pipeline, and one real
embedded LLM server for the whole session."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = ROOT / "app" / "data" / "sample" / "corpus.json"
SAMPLE_QUESTIONS = ROOT / "app" / "data" / "sample" / "questions.json"
HOPRAG = str(Path(sys.executable).with_name("hoprag"))
# The sample's two-hop question, the one `make demo` asks: "Ulden River".
DEMO_QUESTION = "Which river flows through the town where Tavistrom College is located?"


# The end-to-end tier: tests that talk to the real chat model, start servers or run the
# installed CLI. Everything else is the fast tier (`make test-fast`: stub gateway, the
# small embedder and NER models, stores of the 24-passage sample).
# trained: test_dm_train's adapter, trained with torch; postgres_url: a PostgreSQL server
E2E_FIXTURES = {"gateway", "trained", "postgres_url"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh HOPRAG_HOME whose models/ points at the provisioned models."""
    real_models = Settings().models_dir
    path = tmp_path_factory.mktemp("hoprag-home")
    (path / "models").symlink_to(real_models, target_is_directory=True)
    old = os.environ.get("HOPRAG_HOME")
    os.environ["HOPRAG_HOME"] = str(path)
    yield path
    if old is None:
        os.environ.pop("HOPRAG_HOME", None)
    else:
        os.environ["HOPRAG_HOME"] = old


@pytest.fixture(scope="session")
def settings(home: Path) -> Settings:
    return Settings(home=home)


@pytest.fixture(scope="session")
def embedder(settings: Settings):
    """The embedder as the app runs it: its fast runtime, built into the test home."""
    from app.encoders.embeddings import Embedder

    return Embedder(settings.runtime_dir)


@pytest.fixture(scope="session")
def ner():
    from app.index.nlp import SentenceNER

    return SentenceNER()


@pytest.fixture(scope="session")
def trained_dm(settings: Settings):
    """The shipped trained DM (app/data/dm), as users get it."""
    from app.dm.features import DM_DIR
    from tools.decision import TrainedDM

    dm = TrainedDM.load(DM_DIR, settings.runtime_dir)
    assert dm is not None, f"no trained DM in {DM_DIR}"
    return dm


@pytest.fixture(scope="session")
def sample_index(settings: Settings, embedder, ner) -> str:
    from app.index.indexing import build_index

    build_index(settings, SAMPLE_CORPUS, "sample", progress=False, embedder=embedder, ner=ner)
    return "sample"


@pytest.fixture(scope="session")
def gateway(settings: Settings):
    """The real embedded llama.cpp server, started once for the session."""
    from app.llm.gateway import LLMGateway

    gw = LLMGateway(settings)
    yield gw
    gw.close()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL server on loopback for the session (bench/services.py)."""
    from bench.services import postgres_server

    with postgres_server() as url:
        yield url


@pytest.fixture
def serve_execs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """`hoprag serve` without the server: the argument lists it would exec, run from the
    repository (where langgraph.json is)."""
    from app.cli import server

    started: list[list[str]] = []
    monkeypatch.setattr(server.os, "execve", lambda path, args, env: started.append(args))
    monkeypatch.chdir(ROOT)
    return started


def run_cli(
    *args: str, home: Path, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run the installed `hoprag` console script as a user would."""
    full_env = {**os.environ, "HOPRAG_HOME": str(home), **(env or {})}
    return subprocess.run(
        [HOPRAG, *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def assert_user_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    """One clear `error:` line (plus an optional hint), non-zero exit, no traceback."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert lines and lines[0].startswith("error: "), proc.stderr
    assert len(lines) <= 2, proc.stderr
    for needle in needles:
        assert needle.lower() in proc.stderr.lower(), proc.stderr


def stored_data(home: Path) -> dict[str, object]:
    """What the stores hold: the bytes of every index file, the QA cache's entries and
    the checkpoints (rows, not SQLite's files, which WAL bookkeeping touches on open)."""
    data: dict[str, object] = {}
    for path in sorted((home / "indexes").rglob("*")):
        if path.is_file() and ".qa_cache.sqlite" not in path.name:
            data[str(path.relative_to(home))] = hashlib.sha256(path.read_bytes()).hexdigest()
    queries = {
        "qa_cache.sqlite": "SELECT * FROM entries ORDER BY id",
        "checkpoints.sqlite": "SELECT thread_id, checkpoint_id FROM checkpoints ORDER BY 1, 2",
    }
    for path in [*(home / "indexes").glob("*.qa_cache.sqlite"), home / "checkpoints.sqlite"]:
        if path.is_file():
            query = queries[path.name.split(".", 1)[-1] if "qa_cache" in path.name else path.name]
            with sqlite3.connect(path) as db:
                data[path.name] = db.execute(query).fetchall()
    return data
