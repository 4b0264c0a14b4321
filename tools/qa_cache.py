"""The QA cache: sub-question answers shared across questions, runs and processes.

Stored in one SQLite file beside each index, or in one Postgres table that every replica
shares (the stores: app/index/qa_store.py). Entries carry the corpus fingerprint they were
answered against, and a lookup only sees entries of the current fingerprint, so a changed
corpus never serves stale answers. The lookups and similarity are `QACache`'s alone; a
store only keeps rows. How sub-questions are normalised, and which two may share an
answer, are rules of tools/question_rules.py (`normalise_question`, `may_share_an_answer`).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.encoders.embeddings import Embedder
from app.index.qa_store import CacheStore, open_store
from app.settings import CACHE_CANDIDATES, CACHE_MIN_COSINE, Settings
from tools.question_rules import normalise_question


@dataclass(frozen=True)
class CachedAnswer:
    sub_question: str
    answer: str
    passage_ids: list[int]
    how: str  # exact | similar
    p_same: float | None = None


class QACache:
    """Shared cache of (sub-question, answer, supporting passage ids)."""

    def __init__(self, store: CacheStore, fingerprint: str, embedder: Embedder) -> None:
        self.store = store
        self.fingerprint = fingerprint
        self.embedder = embedder
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls, settings: Settings, index_name: str, fingerprint: str, embedder: Embedder
    ) -> QACache:
        return cls(open_store(settings, index_name), fingerprint, embedder)

    @property
    def where(self) -> str:
        """The SQLite file, or the Postgres database and index, for messages and stats."""
        return self.store.where

    def exact(self, sub_question: str) -> CachedAnswer | None:
        with self._lock:
            row = self.store.exact(self.fingerprint, normalise_question(sub_question))
        return CachedAnswer(row[0], row[1], json.loads(row[2]), "exact") if row else None

    def similar(self, sub_question: str, k: int = CACHE_CANDIDATES) -> list[dict[str, Any]]:
        """The k most similar cached sub-questions by embedding (above a cosine floor)."""
        with self._lock:
            rows = self.store.rows(self.fingerprint)
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
            self.store.log(time.time(), outcome)

    def put(self, sub_question: str, answer: str, passage_ids: list[int]) -> None:
        vector = self.embedder.embed([sub_question])[0].astype(np.float32).tobytes()
        row = (sub_question, answer, json.dumps(passage_ids), vector)
        with self._lock:
            self.store.put(self.fingerprint, normalise_question(sub_question), row, time.time())

    def stats(self) -> dict[str, Any]:
        with self._lock:
            entries, stale, outcomes = self.store.counts(self.fingerprint)
        lookups = sum(outcomes.values())
        hits = outcomes.get("exact", 0) + outcomes.get("similar", 0)
        return {
            "path": self.where,
            "entries": entries,
            "stale_entries": stale,
            "lookups": lookups,
            "hits": hits,
            "by_outcome": outcomes,
            "hit_rate": round(hits / lookups, 4) if lookups else None,
        }

    def forget_passage(self, passage_id: int) -> int:
        """Delete the entries answered from a passage (one found hostile or wrong): the
        number deleted."""
        with self._lock:
            return self.store.forget(self.fingerprint, passage_id)

    def prune(self) -> int:
        """Delete the entries of other corpus versions: their passages changed or went, and
        lookups never see them again."""
        with self._lock:
            return self.store.prune(self.fingerprint)

    def clear(self) -> int:
        with self._lock:
            return self.store.clear()

    def close(self) -> None:
        self.store.close()
