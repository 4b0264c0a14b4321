"""The QA cache: sub-question answers shared across questions, runs and processes.

One SQLite file beside each index (``indexes/NAME.qa_cache.sqlite``, outside the index
folder so that a rebuild does not erase it). Entries carry the corpus fingerprint they
were answered against, and a lookup only sees entries of the current fingerprint, so a
changed corpus never serves stale answers. WAL mode and a busy timeout make concurrent
writers from several processes safe.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.embeddings import Embedder
from app.metrics import normalize_answer
from app.settings import CACHE_CANDIDATES, CACHE_MIN_COSINE

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


@dataclass(frozen=True)
class CachedAnswer:
    sub_question: str
    answer: str
    passage_ids: list[int]
    how: str  # exact | similar
    p_same: float | None = None


def normalise_question(text: str) -> str:
    """Case and punctuation ignored (SQuAD normalisation)."""
    return normalize_answer(text)


class QACache:
    """Shared cache of (sub-question, answer, supporting passage ids)."""

    def __init__(self, path: Path, fingerprint: str, embedder: Embedder) -> None:
        self.path = path
        self.fingerprint = fingerprint
        self.embedder = embedder
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA busy_timeout=30000")
            self.db.executescript(SCHEMA)
            self.db.execute("SELECT COUNT(*) FROM entries").fetchone()
        except sqlite3.DatabaseError as exc:
            from app.errors import UserError

            raise UserError(
                f"the QA cache {path} is damaged ({exc})",
                hint="delete it or run `hoprag cache clear`",
            ) from None

    def _log(self, outcome: str) -> None:
        self.db.execute("INSERT INTO lookups VALUES (?, ?)", (time.time(), outcome))

    def exact(self, sub_question: str) -> CachedAnswer | None:
        row = self.db.execute(
            "SELECT sub_question, answer, passage_ids FROM entries "
            "WHERE fingerprint = ? AND norm = ?",
            (self.fingerprint, normalise_question(sub_question)),
        ).fetchone()
        return CachedAnswer(row[0], row[1], json.loads(row[2]), "exact") if row else None

    def similar(self, sub_question: str, k: int = CACHE_CANDIDATES) -> list[dict[str, Any]]:
        """The k most similar cached sub-questions by embedding (above a cosine floor)."""
        rows = self.db.execute(
            "SELECT sub_question, answer, passage_ids, embedding FROM entries "
            "WHERE fingerprint = ?",
            (self.fingerprint,),
        ).fetchall()
        if not rows:
            return []
        query = self.embedder.embed([sub_question])[0]
        matrix = np.stack([np.frombuffer(r[3], dtype=np.float32) for r in rows])
        scores = matrix @ query
        order = np.argsort(-scores)[:k]
        return [
            {
                "sub_question": rows[i][0],
                "answer": rows[i][1],
                "passage_ids": json.loads(rows[i][2]),
                "cosine": float(scores[i]),
            }
            for i in order
            if scores[i] >= CACHE_MIN_COSINE
        ]

    def record_lookup(self, outcome: str) -> None:
        with self._lock:
            self._log(outcome)

    def put(self, sub_question: str, answer: str, passage_ids: list[int]) -> None:
        vector = self.embedder.embed([sub_question])[0].tobytes()
        with self._lock:
            self.db.execute(
                "INSERT INTO entries (fingerprint, norm, sub_question, answer, passage_ids, "
                "embedding, created) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (fingerprint, norm) DO UPDATE SET answer = excluded.answer, "
                "passage_ids = excluded.passage_ids, created = excluded.created",
                (
                    self.fingerprint,
                    normalise_question(sub_question),
                    sub_question,
                    answer,
                    json.dumps(passage_ids),
                    vector,
                    time.time(),
                ),
            )

    def stats(self) -> dict[str, Any]:
        entries = self.db.execute(
            "SELECT COUNT(*) FROM entries WHERE fingerprint = ?", (self.fingerprint,)
        ).fetchone()[0]
        stale = self.db.execute(
            "SELECT COUNT(*) FROM entries WHERE fingerprint != ?", (self.fingerprint,)
        ).fetchone()[0]
        outcomes = dict(
            self.db.execute("SELECT outcome, COUNT(*) FROM lookups GROUP BY outcome").fetchall()
        )
        lookups = sum(outcomes.values())
        hits = outcomes.get("exact", 0) + outcomes.get("similar", 0)
        return {
            "path": str(self.path),
            "entries": entries,
            "stale_entries": stale,
            "lookups": lookups,
            "hits": hits,
            "by_outcome": outcomes,
            "hit_rate": round(hits / lookups, 4) if lookups else None,
        }

    def clear(self) -> int:
        with self._lock:
            n = self.db.execute("DELETE FROM entries").rowcount
            self.db.execute("DELETE FROM lookups")
        return int(n)

    def close(self) -> None:
        self.db.close()
