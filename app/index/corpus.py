"""Reading document collections into passages, with input checks that explain themselves.

Three shapes are accepted: our benchmark format (a JSON list of ``{title, text}``; the
position is the passage id), JSONL with the same fields, and documents: one PDF, HTML,
Word, Markdown or text file, or a folder of them (in sorted path order), each split into
passages by its structure and then by size (app/index/documents.py).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import UserError
from app.index.documents import DOCUMENT_SUFFIXES, Source, chunk_documents, documents_in
from app.index.instructions import strip_instructions
from app.settings import Settings

ELISION = "..."  # between sentences of an excerpt that are not adjacent


@dataclass(frozen=True)
class Passage:
    id: int
    title: str
    text: str
    source: Source | None = None  # where in a document it was cut from

    @property
    def content_hash(self) -> str:
        """Identity of the content, independent of position: keys reusable work."""
        return hashlib.sha256(f"{self.title}\x00{self.text}".encode()).hexdigest()


def fingerprint(passages: list[Passage]) -> str:
    """Fingerprint of the whole ordered corpus: unchanged iff this is unchanged."""
    digest = hashlib.sha256()
    for p in passages:
        digest.update(p.content_hash.encode())
        if p.source is not None:  # a moved section changes citations, not analyses
            digest.update(json.dumps(p.source.to_dict(), sort_keys=True).encode())
    return digest.hexdigest()


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text", hint="convert it to UTF-8") from None
    except PermissionError:
        raise UserError(f"{path} cannot be read (permission denied)") from None
    except OSError as exc:
        raise UserError(f"{path} cannot be read: {exc.strerror}") from None


def _record(item: Any, where: str) -> tuple[str, str]:
    if not isinstance(item, dict):
        raise UserError(
            f"{where}: expected an object with 'title' and 'text', got {type(item).__name__}"
        )
    missing = [k for k in ("title", "text") if k not in item]
    if missing:
        raise UserError(
            f"{where}: missing field {', '.join(repr(k) for k in missing)}",
            hint="every passage needs a 'title' and a 'text'",
        )
    title, text = item["title"], item["text"]
    if not isinstance(title, str) or not isinstance(text, str):
        raise UserError(f"{where}: 'title' and 'text' must be strings")
    return title, text


def _from_json(path: Path) -> list[tuple[str, str]]:
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{path} is not valid JSON (line {exc.lineno}: {exc.msg})",
            hint="expected a JSON list of {title, text} objects",
        ) from None
    if not isinstance(data, list):
        raise UserError(
            f"{path} holds a JSON {type(data).__name__}, not a list",
            hint="expected a JSON list of {title, text} objects",
        )
    return [_record(item, f"{path} item {i}") for i, item in enumerate(data)]


def _from_jsonl(path: Path) -> list[tuple[str, str]]:
    records = []
    for lineno, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path} line {lineno} is not valid JSON ({exc.msg})") from None
        records.append(_record(item, f"{path} line {lineno}"))
    return records


def _warn(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr)


def _from_documents(
    files: list[Path], root: Path, settings: Settings, warn: Callable[[str], None]
) -> list[Passage]:
    chunks = chunk_documents(
        files,
        root,
        chunk_words=settings.chunk_words,
        max_bytes=int(settings.max_document_mb * 2**20),
        warn=warn,
    )
    return [Passage(i, c.title, c.text, c.source) for i, c in enumerate(chunks)]


def load_corpus(
    path: Path, settings: Settings | None = None, warn: Callable[[str], None] = _warn
) -> list[Passage]:
    """Passages of a corpus file or folder; raises `UserError` on anything malformed.
    A document that cannot be read is skipped with one `warn` line naming it."""
    path = Path(path).expanduser()
    settings = settings or Settings()
    if not path.exists():
        raise UserError(f"corpus {path} does not exist")
    if path.is_dir():
        files = documents_in(path)
        if not files:
            raise UserError(
                f"folder {path} holds no documents hoprag reads",
                hint=f"it reads {', '.join(DOCUMENT_SUFFIXES)} files",
            )
        passages = _from_documents(files, path, settings, warn)
    elif path.suffix.lower() in DOCUMENT_SUFFIXES:
        passages = _from_documents([path], path, settings, warn)
    elif path.suffix.lower() in (".json", ".jsonl"):
        records = _from_jsonl(path) if path.suffix.lower() == ".jsonl" else _from_json(path)
        passages = [Passage(i, t.strip(), x.strip()) for i, (t, x) in enumerate(records)]
    else:
        raise UserError(
            f"{path} is not a corpus hoprag can read",
            hint=f"use a .json list, a .jsonl file, a document ({', '.join(DOCUMENT_SUFFIXES)})"
            " or a folder of documents",
        )
    if not any(p.text for p in passages):
        raise UserError(f"corpus {path} is empty (no passage has any text)")
    return _without_instructions(passages, warn) if settings.strip_instructions else passages


def _without_instructions(passages: list[Passage], warn: Callable[[str], None]) -> list[Passage]:
    """Passages without text that gives their reader orders (app/index/instructions.py),
    each cut named in one `warn` line; ids stay where they were."""
    out = []
    for p in passages:
        text, removed = strip_instructions(p.text)
        if removed:
            where = p.source.cite() if p.source else f"passage {p.id} ({p.title})"
            warn(
                f"{where}: cut {len(removed)} piece(s) of text that give the reader orders, "
                f"such as {removed[0][:80]!r} (HOPRAG_STRIP_INSTRUCTIONS=off keeps them)"
            )
            p = Passage(p.id, p.title, text, p.source)
        out.append(p)
    return out


def passage_text(title: str, text: str) -> str:
    """What the retrievers see of a passage: its title carries the entity it is about."""
    return f"{title}: {text}" if title else text


def excerpt(passage: dict[str, Any], sentences: Sequence[tuple[int, str]]) -> dict[str, Any]:
    """The passage as read: its chosen sentences in passage order, gaps marked, with their
    positions (so that what several steps read of one passage merges by sentence)."""
    ordered = sorted(dict(sentences).items())
    parts: list[str] = []
    for n, (position, text) in enumerate(ordered):
        if n and position != ordered[n - 1][0] + 1:
            parts.append(ELISION)
        parts.append(text)
    return {
        "id": passage["id"],
        "title": passage["title"],
        "text": " ".join(parts),
        "sentences": [list(s) for s in ordered],
    }
