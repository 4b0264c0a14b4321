"""Where the QA cache (tools/qa_cache.py) keeps its rows: one SQLite file beside each index
(``indexes/NAME.qa_cache.sqlite``, outside the index folder so that a rebuild does not
erase it), or, with HOPRAG_POSTGRES_URL set, one Postgres table that every replica shares
(rows keyed by index name). Concurrent writers from several processes are safe on both:
WAL and a busy timeout in SQLite, row upserts in Postgres. A store only keeps rows; the
lookups and similarity are `QACache`'s. Dropping an index drops its rows here
(app/index/store.py: `drop_index`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from app.errors import UserError
from app.settings import (
    QA_CACHE_SCHEMA_LOCK,
    QA_CACHE_SUFFIX,
    SQLITE_BUSY_S,
    SQLITE_RETRY_PAUSE_S,
    Settings,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    norm TEXT NOT NULL,
    sub_question TEXT NOT NULL,
    answer TEXT NOT NULL,
    passage_ids TEXT NOT NULL,
    embedding BLOB NOT NULL,
    created REAL NOT NULL,
    UNIQUE (fingerprint, norm)
);
CREATE TABLE IF NOT EXISTS lookups (ts REAL NOT NULL, outcome TEXT NOT NULL);
"""
# One table of entries and one of lookups for every index; `index_name` keeps them apart.
POSTGRES_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS hoprag_qa_entries (
        index_name TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        norm TEXT NOT NULL,
        sub_question TEXT NOT NULL,
        answer TEXT NOT NULL,
        passage_ids TEXT NOT NULL,
        embedding BYTEA NOT NULL,
        created DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (index_name, fingerprint, norm)
    )""",
    """CREATE TABLE IF NOT EXISTS hoprag_qa_lookups (
        index_name TEXT NOT NULL,
        ts DOUBLE PRECISION NOT NULL,
        outcome TEXT NOT NULL
    )""",
)
# sub_question, answer, passage_ids (JSON), embedding (float32 bytes)
Row = tuple[str, str, str, bytes]


class CacheStore(Protocol):
    """Where a QA cache keeps its rows: `SqliteStore` or `PostgresStore`."""

    where: str

    def exact(self, fingerprint: str, norm: str) -> Row | None: ...
    def rows(self, fingerprint: str) -> list[Row]: ...
    def put(self, fingerprint: str, norm: str, row: Row, created: float) -> None: ...
    def log(self, ts: float, outcome: str) -> None: ...
    def counts(self, fingerprint: str) -> tuple[int, int, dict[str, int]]: ...
    def forget(self, fingerprint: str, passage_id: int) -> int: ...
    def prune(self, fingerprint: str) -> int: ...
    def clear(self) -> int: ...
    def close(self) -> None: ...


class SqliteStore:
    """One index's cache in a SQLite file beside the index."""

    def __init__(self, path: Path) -> None:
        self.where = str(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(
            path, timeout=SQLITE_BUSY_S, check_same_thread=False, isolation_level=None
        )
        deadline = time.monotonic() + SQLITE_BUSY_S
        while True:
            try:
                self._set_up()
                return
            except sqlite3.OperationalError as exc:
                # Switching a new file to WAL while another process does the same can
                # fail at once with "database is locked": SQLite skips the busy handler
                # there, so the set-up is retried here instead.
                if "locked" not in str(exc):
                    raise self._damaged(path, exc) from None
                if time.monotonic() > deadline:
                    raise UserError(
                        f"the QA cache {path} stayed locked for {SQLITE_BUSY_S} s",
                        hint="another process holds it: let it finish, or stop it",
                    ) from None
                time.sleep(SQLITE_RETRY_PAUSE_S)
            except sqlite3.DatabaseError as exc:
                raise self._damaged(path, exc) from None

    def _set_up(self) -> None:
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_S * 1000}")
        self.db.executescript(SCHEMA)
        self.db.execute("SELECT COUNT(*) FROM entries").fetchone()

    @staticmethod
    def _damaged(path: Path, exc: sqlite3.DatabaseError) -> UserError:
        return UserError(
            f"the QA cache {path} is damaged ({exc})",
            hint="delete it or run `hoprag cache clear`",
        )

    def exact(self, fingerprint: str, norm: str) -> Row | None:
        return self.db.execute(
            "SELECT sub_question, answer, passage_ids, embedding FROM entries "
            "WHERE fingerprint = ? AND norm = ?",
            (fingerprint, norm),
        ).fetchone()

    def rows(self, fingerprint: str) -> list[Row]:
        return self.db.execute(
            "SELECT sub_question, answer, passage_ids, embedding FROM entries "
            "WHERE fingerprint = ?",
            (fingerprint,),
        ).fetchall()

    def put(self, fingerprint: str, norm: str, row: Row, created: float) -> None:
        self.db.execute(
            "INSERT INTO entries (fingerprint, norm, sub_question, answer, passage_ids, "
            "embedding, created) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (fingerprint, norm) DO UPDATE SET answer = excluded.answer, "
            "passage_ids = excluded.passage_ids, created = excluded.created",
            (fingerprint, norm, *row, created),
        )

    def log(self, ts: float, outcome: str) -> None:
        self.db.execute("INSERT INTO lookups VALUES (?, ?)", (ts, outcome))

    def counts(self, fingerprint: str) -> tuple[int, int, dict[str, int]]:
        current, stale = self.db.execute(
            "SELECT COALESCE(SUM(fingerprint = ?), 0), COALESCE(SUM(fingerprint != ?), 0) "
            "FROM entries",
            (fingerprint, fingerprint),
        ).fetchone()
        outcomes = self.db.execute("SELECT outcome, COUNT(*) FROM lookups GROUP BY outcome")
        return int(current), int(stale), {str(o): int(n) for o, n in outcomes.fetchall()}

    def forget(self, fingerprint: str, passage_id: int) -> int:
        return int(
            self.db.execute(
                "DELETE FROM entries WHERE fingerprint = ? AND EXISTS "
                "(SELECT 1 FROM json_each(entries.passage_ids) WHERE value = ?)",
                (fingerprint, passage_id),
            ).rowcount
        )

    def prune(self, fingerprint: str) -> int:
        return int(
            self.db.execute("DELETE FROM entries WHERE fingerprint != ?", (fingerprint,)).rowcount
        )

    def clear(self) -> int:
        n = self.db.execute("DELETE FROM entries").rowcount
        self.db.execute("DELETE FROM lookups")
        return int(n)

    def close(self) -> None:
        self.db.close()


class PostgresStore:
    """One index's cache in the shared Postgres database: every replica reads and writes
    the same rows. A connection the database dropped (a restart, a failover) is opened
    again once per statement before the failure is reported."""

    def __init__(self, url: str, index_name: str) -> None:
        from app.postgres import connect, redact

        self.url = url
        self.index_name = index_name
        self.where = f"{redact(url)} (index {index_name})"
        self.conn = connect(url, "QA cache")
        with self.conn.transaction():  # one process creates the tables, the others wait
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (QA_CACHE_SCHEMA_LOCK,))
            for statement in POSTGRES_SCHEMA:
                self.conn.execute(statement)

    def _run(self, sql: str, params: tuple[Any, ...], fetch: Callable[[Any], Any]) -> Any:
        import psycopg

        from app.postgres import connect, unreachable

        try:
            return fetch(self.conn.execute(sql, params))
        except psycopg.OperationalError as exc:
            if not self.conn.closed:  # the database answered, with an error of its own
                raise unreachable(self.url, "QA cache", exc) from None
        self.conn = connect(self.url, "QA cache")  # it dropped the connection: once more
        try:
            return fetch(self.conn.execute(sql, params))
        except psycopg.OperationalError as exc:
            raise unreachable(self.url, "QA cache", exc) from None

    def exact(self, fingerprint: str, norm: str) -> Row | None:
        row = self._run(
            "SELECT sub_question, answer, passage_ids, embedding FROM hoprag_qa_entries "
            "WHERE index_name = %s AND fingerprint = %s AND norm = %s",
            (self.index_name, fingerprint, norm),
            lambda cur: cur.fetchone(),
        )
        return (row[0], row[1], row[2], bytes(row[3])) if row else None

    def rows(self, fingerprint: str) -> list[Row]:
        rows = self._run(
            "SELECT sub_question, answer, passage_ids, embedding FROM hoprag_qa_entries "
            "WHERE index_name = %s AND fingerprint = %s",
            (self.index_name, fingerprint),
            lambda cur: cur.fetchall(),
        )
        return [(r[0], r[1], r[2], bytes(r[3])) for r in rows]

    def put(self, fingerprint: str, norm: str, row: Row, created: float) -> None:
        self._run(
            "INSERT INTO hoprag_qa_entries (index_name, fingerprint, norm, sub_question, "
            "answer, passage_ids, embedding, created) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (index_name, fingerprint, norm) DO UPDATE SET "
            "answer = excluded.answer, passage_ids = excluded.passage_ids, "
            "created = excluded.created",
            (self.index_name, fingerprint, norm, *row, created),
            lambda cur: None,
        )

    def log(self, ts: float, outcome: str) -> None:
        self._run(
            "INSERT INTO hoprag_qa_lookups VALUES (%s, %s, %s)",
            (self.index_name, ts, outcome),
            lambda cur: None,
        )

    def counts(self, fingerprint: str) -> tuple[int, int, dict[str, int]]:
        current, stale = self._run(
            "SELECT COUNT(*) FILTER (WHERE fingerprint = %s), "
            "COUNT(*) FILTER (WHERE fingerprint != %s) "
            "FROM hoprag_qa_entries WHERE index_name = %s",
            (fingerprint, fingerprint, self.index_name),
            lambda cur: cur.fetchone(),
        )
        outcomes = self._run(
            "SELECT outcome, COUNT(*) FROM hoprag_qa_lookups WHERE index_name = %s "
            "GROUP BY outcome",
            (self.index_name,),
            lambda cur: cur.fetchall(),
        )
        return int(current), int(stale), {str(o): int(n) for o, n in outcomes}

    def forget(self, fingerprint: str, passage_id: int) -> int:
        return int(
            self._run(
                "DELETE FROM hoprag_qa_entries WHERE index_name = %s AND fingerprint = %s "
                "AND passage_ids::jsonb @> %s::jsonb",
                (self.index_name, fingerprint, json.dumps([passage_id])),
                lambda cur: cur.rowcount,
            )
        )

    def prune(self, fingerprint: str) -> int:
        return int(
            self._run(
                "DELETE FROM hoprag_qa_entries WHERE index_name = %s AND fingerprint != %s",
                (self.index_name, fingerprint),
                lambda cur: cur.rowcount,
            )
        )

    def clear(self) -> int:
        n = self._run(
            "DELETE FROM hoprag_qa_entries WHERE index_name = %s",
            (self.index_name,),
            lambda cur: cur.rowcount,
        )
        self._run(
            "DELETE FROM hoprag_qa_lookups WHERE index_name = %s",
            (self.index_name,),
            lambda cur: None,
        )
        return int(n)

    def close(self) -> None:
        self.conn.close()


def open_store(settings: Settings, index_name: str) -> CacheStore:
    """The store the settings select: Postgres when HOPRAG_POSTGRES_URL is set (shared by
    every process), else the SQLite file beside the index."""
    if settings.postgres_url:
        return PostgresStore(settings.postgres_url, index_name)
    return SqliteStore(settings.indexes_dir / f"{index_name}{QA_CACHE_SUFFIX}")
