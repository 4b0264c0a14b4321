"""Thread retention: `hoprag threads prune --older-than DAYS` and
HOPRAG_THREAD_RETENTION_DAYS delete the checkpoints, writes and blobs of threads whose
last run is older, on SQLite and on Postgres, and keep every other thread whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver

from app.checkpoints import list_threads, open_checkpointer, prune_threads
from app.errors import UserError
from app.llm.engine import free_port
from app.settings import Settings
from tests.conftest import ROOT, assert_user_error

NOW = datetime.now(UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.e2e)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """Settings that checkpoint in a private home's SQLite file, or in a fresh database
    of the session's PostgreSQL server."""
    if request.param == "sqlite":
        return Settings(home=tmp_path)
    import psycopg

    server = request.getfixturevalue("postgres_url")
    name = f"threads_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return Settings(home=tmp_path, postgres_url=server.rsplit("/", 1)[0] + f"/{name}")


def checkpoint(saver: BaseCheckpointSaver, thread_id: str, days_ago: float) -> None:
    """A run's checkpoint written `days_ago`, with a channel value (a blob in Postgres)
    and a pending write, as a real run leaves them."""
    cp = empty_checkpoint()
    cp["ts"] = (NOW - timedelta(days=days_ago)).isoformat()
    cp["channel_values"] = {"question": f"question of {thread_id}"}
    cp["channel_versions"] = {"question": f"{days_ago}"}
    config = saver.put(
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}},
        cp,
        {"source": "input", "system": "deft", "index": "sample"},
        {"question": f"{days_ago}"},
    )
    saver.put_writes(config, [("answer", f"answer of {thread_id}")], task_id="task-1")


def rows_of(saver: BaseCheckpointSaver, thread_id: str) -> int:
    """Every stored row of a thread, in every table the saver keeps."""
    tables = ["checkpoints", "writes"]
    postgres = isinstance(saver, PostgresSaver)
    if postgres:
        tables = ["checkpoints", "checkpoint_writes", "checkpoint_blobs"]
    mark = "%s" if postgres else "?"
    total = 0
    for table in tables:
        row: Any = saver.conn.execute(  # type: ignore[attr-defined]
            f"SELECT COUNT(*) AS n FROM {table} WHERE thread_id = {mark}", (thread_id,)
        ).fetchone()
        total += int(row["n"] if isinstance(row, dict) else row[0])
    return total


def make_threads(settings: Settings) -> None:
    with open_checkpointer(settings) as saver:
        checkpoint(saver, "old", 40)
        checkpoint(saver, "older", 400)
        checkpoint(saver, "recent", 1)
        checkpoint(saver, "revived", 90)  # an old thread with a new turn: kept
        checkpoint(saver, "revived", 2)


def test_prune_deletes_old_threads_whole_and_keeps_the_rest(store: Settings) -> None:
    make_threads(store)
    with open_checkpointer(store) as saver:
        assert [t.thread_id for t in list_threads(saver)] == ["older", "old", "revived", "recent"]
        kept_rows = {t: rows_of(saver, t) for t in ("recent", "revived")}
        assert rows_of(saver, "old") >= 2 and rows_of(saver, "older") >= 2
        due = prune_threads(saver, 30, dry_run=True)
        assert sorted(t.thread_id for t in due) == ["old", "older"]
        assert rows_of(saver, "old") >= 2  # a dry run deletes nothing
        pruned = prune_threads(saver, 30)
        assert sorted(t.thread_id for t in pruned) == ["old", "older"]
        assert rows_of(saver, "old") == rows_of(saver, "older") == 0
        assert {t: rows_of(saver, t) for t in kept_rows} == kept_rows
        assert [t.thread_id for t in list_threads(saver)] == ["revived", "recent"]
        revived = saver.get_tuple({"configurable": {"thread_id": "revived"}})
        assert revived is not None
        assert revived.checkpoint["channel_values"] == {"question": "question of revived"}
        assert prune_threads(saver, 30) == []  # nothing more is that old
        assert [t.thread_id for t in prune_threads(saver, 1.5)] == ["revived"]


@pytest.mark.parametrize("days", [0, -3, float("nan"), float("inf")])
def test_a_retention_that_is_not_a_positive_number_of_days_is_refused(
    tmp_path: Path, days: float
) -> None:
    with (
        open_checkpointer(Settings(home=tmp_path)) as saver,
        pytest.raises(UserError, match="positive number of days"),
    ):
        prune_threads(saver, days)
    with pytest.raises(UserError, match="HOPRAG_THREAD_RETENTION_DAYS"):
        Settings(home=tmp_path, thread_retention_days=-1.0)


def hoprag(*args: str, settings: Settings, **env: str) -> subprocess.CompletedProcess[str]:
    """The command line in a process of its own (the one that wrote the threads is not)."""
    full = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HOPRAG_HOME": str(settings.home),
        "HOPRAG_POSTGRES_URL": settings.postgres_url,
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_threads_prune_and_list_from_the_command_line(store: Settings) -> None:
    make_threads(store)
    dry = hoprag("threads", "prune", "--older-than", "30", "--dry-run", settings=store)
    assert dry.returncode == 0, dry.stderr
    assert "would delete 2 thread(s)" in dry.stdout
    pruned = hoprag("threads", "prune", "--older-than", "30", settings=store)
    assert pruned.returncode == 0, pruned.stderr
    assert "deleted 2 thread(s) older than 30 days" in pruned.stdout
    assert {line.split()[0] for line in pruned.stdout.splitlines()[:-1]} == {"old", "older"}
    listed = hoprag("threads", "list", settings=store)
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == ["revived", "recent"]
    for bad in ("-1", "0"):
        proc = hoprag("threads", "prune", "--older-than", bad, settings=store)
        assert_user_error(proc, "positive number of days")
    proc = hoprag("threads", "prune", "--older-than", "soon", settings=store)
    assert proc.returncode == 2 and "Invalid value for '--older-than'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert_user_error(
        hoprag("serve", settings=store, HOPRAG_THREAD_RETENTION_DAYS="-2"),
        "HOPRAG_THREAD_RETENTION_DAYS",
    )
    with open_checkpointer(store) as saver:  # the bad commands deleted nothing
        assert [t.thread_id for t in list_threads(saver)] == ["revived", "recent"]


@pytest.mark.e2e  # starts the server
def test_hoprag_serve_applies_the_retention_setting_before_it_serves(store: Settings) -> None:
    make_threads(store)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HOPRAG_HOME": str(store.home),
        "HOPRAG_POSTGRES_URL": store.postgres_url,
        "HOPRAG_PORT": str(free_port()),
        "HOPRAG_THREAD_RETENTION_DAYS": "30",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve"],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("serving on") or time.monotonic() > deadline:
                break
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert "retention: deleted 2 thread(s) idle for over 30 days\n" in lines, lines
    assert lines[-1].startswith("serving on"), lines
    with open_checkpointer(store) as saver:
        assert [t.thread_id for t in list_threads(saver)] == ["revived", "recent"]
