"""An index on disk: SQLite tables, a Chroma collection and a bm25s index, side by side.

Layout of ``$HOPRAG_HOME/indexes/NAME/``, a link to the index's current version folder
(app/index/versions.py)::

    manifest.json   name, corpus fingerprint, counts, models, timings
    hoprag.sqlite   passages (with embeddings), sentences, entities, mentions
    chroma-FP/      persistent Chroma collection "passages" (cosine space); the folder
                    is named after the corpus fingerprint so a rebuilt index never
                    meets a stale in-process Chroma client
    bm25/           bm25s index over title + text

With HOPRAG_CHROMA_URL set, dense search goes to that Chroma server instead (one
collection per index and corpus fingerprint, uploaded from hoprag.sqlite on first use),
so that many serving machines share one vector store.

The manifest records the sha256 of every file but Chroma's (which Chroma itself writes
to when opened), and opening an index checks them: a damaged file is reported, never
silently used.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import chromadb
import chromadb.errors
import numpy as np
from chromadb.config import Settings as ChromaSettings

from app.checks import check_name, require_index
from app.errors import ServiceError, UserError
from app.index.documents import Source
from app.index.versions import name_lock, settle, unpublish
from app.settings import QA_CACHE_SUFFIX, Settings

INDEX_FORMAT = 2  # 2: passages keep their source in a document
COLLECTION = "passages"

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE passages (
    id INTEGER PRIMARY KEY, title TEXT NOT NULL, text TEXT NOT NULL,
    content_hash TEXT NOT NULL, embedding BLOB NOT NULL, source TEXT
);
CREATE TABLE sentences (
    id INTEGER PRIMARY KEY, passage_id INTEGER NOT NULL REFERENCES passages(id),
    position INTEGER NOT NULL, text TEXT NOT NULL, start INTEGER NOT NULL, "end" INTEGER NOT NULL
);
CREATE TABLE entities (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, label TEXT NOT NULL);
CREATE TABLE mentions (
    entity_id INTEGER NOT NULL REFERENCES entities(id),
    sentence_id INTEGER NOT NULL REFERENCES sentences(id),
    surface TEXT NOT NULL,
    PRIMARY KEY (entity_id, sentence_id, surface)
);
CREATE INDEX sentences_by_passage ON sentences(passage_id, position);
CREATE INDEX mentions_by_sentence ON mentions(sentence_id);
CREATE INDEX passages_by_hash ON passages(content_hash);
"""


def chroma_client(path: Path) -> Any:
    """A persistent Chroma client with telemetry off."""
    return chromadb.PersistentClient(
        path=str(path), settings=ChromaSettings(anonymized_telemetry=False)
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def seal(folder: Path, manifest: dict[str, Any]) -> None:
    """Record in `manifest` the sha256 of every file of the index folder but the
    manifest and the Chroma folder."""
    chroma = folder / manifest["chroma_dir"]
    manifest["checksums"] = {
        str(p.relative_to(folder)): _sha256(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "manifest.json" and chroma not in p.parents
    }


def _damaged(name: str, path: Path, what: str) -> UserError:
    return UserError(
        f"index {name!r} at {path} is damaged ({what})",
        hint=f"rebuild it with `hoprag index PATH --name {name}`",
    )


@dataclass(frozen=True)
class PassageRecord:
    id: int
    title: str
    text: str
    source: Source | None = None

    def cite(self) -> str:
        """What a citation names: the place in a document, else the passage's title."""
        return self.source.cite() if self.source else self.title

    def citation(self) -> dict[str, Any]:
        cited: dict[str, Any] = {"id": self.id, "title": self.title, "cite": self.cite()}
        if self.source is not None:
            cited["source"] = self.source.to_dict()
        return cited


@dataclass(frozen=True)
class SentenceRecord:
    id: int
    passage_id: int
    position: int
    title: str
    text: str


class CorpusIndex:
    """Read access to one finished index. Opened once and shared by all readers."""

    def __init__(self, path: Path, chroma_url: str = "") -> None:
        self.name = path.name
        path = path.resolve()  # this version of the index, whatever the link points to later
        self.path = path
        self.chroma_url = chroma_url
        manifest = path / "manifest.json"
        try:
            self.manifest: dict[str, Any] = json.loads(manifest.read_text())
        except (OSError, json.JSONDecodeError):
            raise UserError(
                f"index {self.name!r} at {path} is damaged (unreadable manifest.json)",
                hint=f"rebuild it with `hoprag index PATH --name {self.name}`",
            ) from None
        if self.manifest.get("format") != INDEX_FORMAT:
            raise UserError(
                f"index {self.name!r} was built by another hoprag version",
                hint=f"rebuild it with `hoprag index PATH --name {self.name}`",
            )
        self._verify()
        self.db = sqlite3.connect(
            f"file:{path / 'hoprag.sqlite'}?mode=ro", uri=True, check_same_thread=False
        )
        try:
            (count,) = self.db.execute("SELECT COUNT(*) FROM passages").fetchone()
        except sqlite3.DatabaseError as exc:
            self.db.close()
            raise _damaged(self.name, path, f"hoprag.sqlite: {exc}") from None
        if count != self.manifest.get("passages"):
            self.db.close()
            raise _damaged(self.name, path, f"hoprag.sqlite holds {count} passages")
        self._collection: Any = None
        self._lock = threading.Lock()

    def _verify(self) -> None:
        """Every file the manifest has a checksum for is there, unchanged (indexes built
        before checksums were recorded get the passage count check alone)."""
        for name, expected in (self.manifest.get("checksums") or {}).items():
            file = self.path / name
            if not file.is_file():
                raise _damaged(self.name, self.path, f"{name} is missing")
            if _sha256(file) != expected:
                raise _damaged(self.name, self.path, f"{name} does not match its checksum")

    @classmethod
    def open(cls, settings: Settings, name: str) -> CorpusIndex:
        return cls(settings.indexes_dir / require_index(settings, name), settings.chroma_url)

    @property
    def collection(self) -> Any:
        with self._lock:  # concurrent first queries would open competing Chroma clients
            return self._open_collection()

    def _open_collection(self) -> Any:
        if self._collection is None and self.chroma_url:
            self._collection = self._remote_collection()
        if self._collection is None:
            try:
                client = chroma_client(self.path / self.manifest["chroma_dir"])
                self._collection = client.get_collection(COLLECTION)
            except Exception as exc:  # Chroma raises many types for a damaged store
                raise _damaged(self.name, self.path, f"Chroma: {str(exc)[:200]}") from None
        return self._collection

    def _remote_collection(self) -> Any:
        """This index's collection on the Chroma server, named after the corpus
        fingerprint; the first process that finds it missing or partial uploads the
        stored passage vectors (an idempotent upsert, safe when several do at once)."""
        url = urlparse(self.chroma_url)
        try:
            client = chromadb.HttpClient(
                host=url.hostname or "127.0.0.1",
                port=url.port or (443 if url.scheme == "https" else 8000),
                ssl=url.scheme == "https",
                settings=ChromaSettings(anonymized_telemetry=False),
            )
            collection = client.get_or_create_collection(
                f"hoprag-{self.name}-{self.manifest['fingerprint'][:12]}",
                metadata={"hnsw:space": "cosine"},
                embedding_function=None,
            )
            if collection.count() != len(self):
                self._upload(collection, max(1, min(5000, client.get_max_batch_size())))
        except (ValueError, ConnectionError, OSError, chromadb.errors.ChromaError) as exc:
            raise ServiceError(
                f"the Chroma server {self.chroma_url} does not answer or refused index "
                f"{self.name!r}: {str(exc)[:200]}",
                hint="check HOPRAG_CHROMA_URL (e.g. http://127.0.0.1:8000), or unset it to "
                "use the index's own Chroma folder",
            ) from None
        return collection

    def _upload(self, collection: Any, batch: int) -> None:
        rows = self.db.execute("SELECT id, title, embedding FROM passages ORDER BY id").fetchall()
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            collection.upsert(
                ids=[str(r[0]) for r in chunk],
                embeddings=np.stack([np.frombuffer(r[2], dtype=np.float32) for r in chunk]),
                metadatas=[{"title": r[1]} for r in chunk],
            )

    def __len__(self) -> int:
        return int(self.manifest["passages"])

    def passages(self, ids: list[int]) -> list[PassageRecord]:
        """Passages by id, in the order asked."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(
            f"SELECT id, title, text, source FROM passages WHERE id IN ({marks})", ids
        ).fetchall()
        by_id = {
            pid: PassageRecord(pid, title, text, Source.from_dict(json.loads(src)) if src else None)
            for pid, title, text, src in rows
        }
        return [by_id[i] for i in ids if i in by_id]

    def embeddings(self, ids: list[int]) -> np.ndarray:
        """Stored unit-length passage vectors (title: text), in the order asked."""
        marks = ",".join("?" * len(ids))
        rows = dict(
            self.db.execute(
                f"SELECT id, embedding FROM passages WHERE id IN ({marks})", ids
            ).fetchall()
        )
        return np.stack([np.frombuffer(rows[i], dtype=np.float32) for i in ids])

    def sentences_of(self, passage_id: int) -> list[str]:
        rows = self.db.execute(
            "SELECT text FROM sentences WHERE passage_id = ? ORDER BY position", (passage_id,)
        ).fetchall()
        return [r[0] for r in rows]

    def sentences(self, ids: list[int]) -> list[SentenceRecord]:
        """Sentences by id (with their passage's title), in the order asked."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(
            "SELECT s.id, s.passage_id, s.position, p.title, s.text FROM sentences s "
            f"JOIN passages p ON p.id = s.passage_id WHERE s.id IN ({marks})",
            ids,
        ).fetchall()
        by_id = {r[0]: SentenceRecord(*r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    def sentences_with(self, entity: str) -> list[tuple[int, int, str]]:
        """(sentence id, passage id, text) of every sentence that mentions the entity."""
        rows = self.db.execute(
            "SELECT s.id, s.passage_id, s.text FROM entities e "
            "JOIN mentions m ON m.entity_id = e.id JOIN sentences s ON s.id = m.sentence_id "
            "WHERE e.name = ? GROUP BY s.id ORDER BY s.id",
            (normalise_entity(entity),),
        ).fetchall()
        return [(int(a), int(b), str(c)) for a, b, c in rows]

    def close(self) -> None:
        self.db.close()


def normalise_entity(surface: str) -> str:
    """Key of the entity index: case-folded, inner white space squashed, 'the' dropped."""
    key = " ".join(surface.casefold().split())
    return key[4:] if key.startswith("the ") else key


def drop_index(settings: Settings, name: str) -> Path:
    """Delete an index and its QA cache, holding the lock every writer of the name holds."""
    root = settings.indexes_dir
    path = root / check_name(name)
    missing = UserError(f"no index named {name!r}", hint="see `hoprag index list`")
    if not path.is_dir():
        raise missing
    with name_lock(root, name):
        current = settle(root, name)
        if current is None:  # dropped while this one waited
            raise missing
        if settings.postgres_url:  # the shared cache: this index's rows (first: it may be down)
            from app.index.qa_store import PostgresStore

            store = PostgresStore(settings.postgres_url, name)
            store.clear()
            store.close()
        unpublish(root, name, current)
        for cache_file in root.glob(f"{name}{QA_CACHE_SUFFIX}*"):
            cache_file.unlink()  # a cache without its index would only ever be stale
    return path
