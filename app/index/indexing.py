"""Turning a corpus into an index, atomically and incrementally.

Every build writes a complete new version of the index into a hidden folder and
switches the index's link to it only when it is finished (app/index/versions.py), so a
crash, even a SIGKILL, never leaves a half-written index or none. The
expensive per-passage work (spaCy sentences + NER, MiniLM embeddings) is keyed by the
passage's content hash and copied from the previous version of the index, so adding
documents only analyses and embeds the new ones. The cheap corpus-wide parts (BM25
statistics, the Chroma HNSW graph, the sentence graph's edges) are rebuilt, because
they depend on the whole collection; sentence vectors are reused by sentence text.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from app.checks import check_name
from app.encoders.embeddings import Embedder
from app.errors import UserError
from app.index.bm25 import build_bm25
from app.index.corpus import Passage, fingerprint, load_corpus, passage_text
from app.index.graph_build import build_sentence_graph, previous_vectors
from app.index.nlp import Analysis, SentenceNER
from app.index.store import (
    COLLECTION,
    INDEX_FORMAT,
    SCHEMA,
    CorpusIndex,
    chroma_client,
    normalise_entity,
    seal,
)
from app.index.versions import name_lock, new_version, settle
from app.settings import SPACY_MODEL, Settings


@dataclass
class IndexReport:
    """What a build did, for the CLI and the benchmarks."""

    name: str
    path: str
    status: str  # created | updated | unchanged
    passages: int
    fingerprint: str  # the corpus's, as the manifest and the QA cache key it
    new_passages: int = 0
    reused_passages: int = 0
    sentences: int = 0
    entities: int = 0
    graph_edges: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def _previous(dest: Path | None) -> CorpusIndex | None:
    if dest is None or not (dest / "manifest.json").is_file():
        return None
    try:
        return CorpusIndex(dest)
    except UserError:
        return None  # damaged or older format: rebuild from scratch


def _reusable(old: CorpusIndex, wanted: set[str]) -> dict[str, tuple[bytes, Analysis]]:
    """Embedding and analysis of every old passage whose content is still wanted."""
    rows = old.db.execute("SELECT id, content_hash, embedding FROM passages").fetchall()
    keep = {pid: (h, emb) for pid, h, emb in rows if h in wanted}
    analyses: dict[int, Analysis] = {pid: Analysis() for pid in keep}
    sentence_pos: dict[int, tuple[int, int]] = {}
    for sid, pid, text, start, end in old.db.execute(
        'SELECT id, passage_id, text, start, "end" FROM sentences ORDER BY passage_id, position'
    ):
        if pid in analyses:
            sentence_pos[sid] = (pid, len(analyses[pid].sentences))
            analyses[pid].sentences.append((text, start, end))
    for sid, surface, label in old.db.execute(
        "SELECT m.sentence_id, m.surface, e.label FROM mentions m "
        "JOIN entities e ON e.id = m.entity_id"
    ):
        if sid in sentence_pos:
            pid, pos = sentence_pos[sid]
            analyses[pid].mentions.append((surface, label, pos))
    return {h: (emb, analyses[pid]) for pid, (h, emb) in keep.items()}


def _write_sqlite(
    path: Path,
    passages: list[Passage],
    vectors: dict[str, bytes],
    analyses: dict[str, Analysis],
    fp: str,
) -> tuple[int, int]:
    db = sqlite3.connect(path)
    try:
        db.executescript(SCHEMA)
        entity_ids: dict[str, int] = {}
        labels: dict[str, Counter[str]] = {}
        mentions: set[tuple[int, int, str]] = set()
        sentence_id = 0
        with db:
            db.executemany(
                "INSERT INTO passages VALUES (?, ?, ?, ?, ?, ?)",
                (
                    (
                        p.id,
                        p.title,
                        p.text,
                        p.content_hash,
                        vectors[p.content_hash],
                        json.dumps(p.source.to_dict()) if p.source else None,
                    )
                    for p in passages
                ),
            )
            sentence_rows = []
            for p in passages:
                analysis = analyses[p.content_hash]
                first = sentence_id
                for pos, (text, start, end) in enumerate(analysis.sentences):
                    sentence_rows.append((sentence_id, p.id, pos, text, start, end))
                    sentence_id += 1
                for surface, label, pos in analysis.mentions:
                    key = normalise_entity(surface)
                    if not key:
                        continue
                    eid = entity_ids.setdefault(key, len(entity_ids))
                    labels.setdefault(key, Counter())[label] += 1
                    mentions.add((eid, first + pos, surface))
            db.executemany("INSERT INTO sentences VALUES (?, ?, ?, ?, ?, ?)", sentence_rows)
            db.executemany(
                "INSERT INTO entities VALUES (?, ?, ?)",
                ((eid, key, labels[key].most_common(1)[0][0]) for key, eid in entity_ids.items()),
            )
            db.executemany("INSERT INTO mentions VALUES (?, ?, ?)", sorted(mentions))
            db.execute("INSERT INTO meta VALUES ('fingerprint', ?)", (fp,))
    finally:
        db.close()
    return sentence_id, len(entity_ids)


def _write_chroma(
    path: Path, passages: list[Passage], vectors: dict[str, bytes], progress: bool
) -> None:
    client = chroma_client(path)
    collection = client.create_collection(
        COLLECTION, metadata={"hnsw:space": "cosine"}, embedding_function=None
    )
    batch = max(1, min(5000, client.get_max_batch_size()))
    for start in tqdm(
        range(0, len(passages), batch), desc="chroma", unit="batch", disable=not progress
    ):
        chunk = passages[start : start + batch]
        collection.add(
            ids=[str(p.id) for p in chunk],
            embeddings=np.stack(
                [np.frombuffer(vectors[p.content_hash], dtype=np.float32) for p in chunk]
            ),
            metadatas=[{"title": p.title} for p in chunk],
        )


def build_index(
    settings: Settings,
    source: Path,
    name: str,
    *,
    progress: bool = True,
    embedder: Embedder | None = None,
    ner: SentenceNER | None = None,
) -> IndexReport:
    """Index `source` under `name`; a no-op if the corpus is unchanged."""
    check_name(name)
    passages = load_corpus(source, settings)  # input errors surface before any model loads
    fp = fingerprint(passages)
    root = settings.indexes_dir
    dest = root / name
    timings: dict[str, float] = {}
    with name_lock(root, name):
        current = settle(root, name)
        old = _previous(current)
        if old is not None and old.manifest.get("fingerprint") == fp:
            old.close()
            return IndexReport(
                name,
                str(dest),
                "unchanged",
                len(passages),
                fp,
                sentences=old.manifest["sentences"],
                entities=old.manifest["entities"],
            )
        t0 = time.perf_counter()
        cache = _reusable(old, {p.content_hash for p in passages}) if old else {}
        if old is not None:
            old.close()
        todo = list({p.content_hash: p for p in passages if p.content_hash not in cache}.values())
        vectors = {h: emb for h, (emb, _) in cache.items()}
        analyses = {h: analysis for h, (_, analysis) in cache.items()}
        timings["reuse"] = time.perf_counter() - t0

        if todo:
            t0 = time.perf_counter()
            ner = ner or SentenceNER()
            for p, analysis in zip(
                todo, ner.analyse([p.text for p in todo], progress=progress), strict=True
            ):
                analyses[p.content_hash] = analysis
            timings["ner"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            embedder = embedder or Embedder(settings.runtime_dir)
            new_vectors = embedder.embed(
                [passage_text(p.title, p.text) for p in todo], progress=progress
            )
            for p, vec in zip(todo, new_vectors, strict=True):
                vectors[p.content_hash] = vec.tobytes()
            timings["embed"] = time.perf_counter() - t0

        with new_version(root, name) as version:
            t0 = time.perf_counter()
            n_sentences, n_entities = _write_sqlite(
                version / "hoprag.sqlite", passages, vectors, analyses, fp
            )
            timings["sqlite"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            chroma_dir = f"chroma-{fp[:12]}"
            _write_chroma(version / chroma_dir, passages, vectors, progress)
            timings["chroma"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            build_bm25([passage_text(p.title, p.text) for p in passages], version / "bm25")
            timings["bm25"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            embedder = embedder or Embedder(settings.runtime_dir)
            graph = build_sentence_graph(
                version,
                embedder,
                progress=progress,
                reuse=previous_vectors(current) if current else None,
            )
            timings["graph"] = time.perf_counter() - t0
            report = IndexReport(
                name,
                str(dest),
                "updated" if old else "created",
                len(passages),
                fp,
                new_passages=len(todo),
                reused_passages=len(passages) - len(todo),
                sentences=n_sentences,
                entities=n_entities,
                graph_edges=graph["edges"],
                seconds={k: round(v, 2) for k, v in timings.items()},
            )
            manifest: dict[str, Any] = {
                "format": INDEX_FORMAT,
                **asdict(report),
                "source": str(Path(source).resolve()),
                "fingerprint": fp,
                "chroma_dir": chroma_dir,
                "embedding_model": (
                    embedder.name if embedder else "sentence-transformers/all-MiniLM-L6-v2"
                ),
                "spacy_model": SPACY_MODEL,
                "built_at": datetime.now(UTC).isoformat(),
            }
            seal(version, manifest)
            (version / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return report
