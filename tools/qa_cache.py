"""The QA cache: sub-question answers shared across questions, runs and processes.

One SQLite file beside each index (``indexes/NAME.qa_cache.sqlite``, outside the index
folder so that a rebuild does not erase it). Entries carry the corpus fingerprint they
were answered against, and a lookup only sees entries of the current fingerprint, so a
changed corpus never serves stale answers. WAL mode and a busy timeout make concurrent
writers from several processes safe.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import Stemmer

from app.encoders.embeddings import Embedder
from app.errors import UserError
from app.eval.metrics import normalize_answer
from app.settings import CACHE_CANDIDATES, CACHE_FILLER_WORDS, CACHE_MIN_COSINE

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


_POSSESSIVE = re.compile(r"['\u2019]s\b")
_WH_WORD = re.compile(
    r"\b(when|where|why|how many|how much|how old|how|who|whom|whose|what|which)\b"
)
_WHEN = re.compile(r"\b(what|which) (year|date|day|month|century|decade)\b")
_ANSWER_KINDS = frozenset({"when", "where", "why", "how many", "how much", "how old", "how"})
_STEMMER = Stemmer.Stemmer("english")


def normalise_question(text: str) -> str:
    """Case and punctuation ignored (SQuAD normalisation)."""
    return normalize_answer(text)


def question_words(text: str) -> list[str]:
    """Normalised words without the possessive 's ("Berg's" is "Berg")."""
    return normalise_question(_POSSESSIVE.sub("", text)).split()


def answer_kind(question: str) -> str:
    """What the question's first wh-word asks for: "when" (also "what year"), "where",
    "how many", "how much", "how old", "how", "why", or an entity (who, what, which)."""
    match = _WH_WORD.search(_WHEN.sub("when", question.lower()))
    word = match.group(1) if match else ""
    return word if word in _ANSWER_KINDS else "entity"


def asks_the_same(first: str, second: str) -> bool:
    """Whether two sub-questions may share an answer: the same kind of answer about the same
    stemmed words, filler aside. Embedding similarity and DM_same both took "Where was X
    born?" for "When was X born?" and "Who was the second president of X?" for "Who was
    the president of X?"; a wrong hit poisons the QA table, a miss only costs one
    retrieval and one reading, so only such pairs go on to DM_same."""

    def terms(question: str) -> frozenset[str]:
        words = question_words(_WHEN.sub("when", question.lower()))
        return frozenset(_STEMMER.stemWords([w for w in words if w not in CACHE_FILLER_WORDS]))

    return answer_kind(first) == answer_kind(second) and terms(first) == terms(second)


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
