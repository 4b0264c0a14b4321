"""Reading document collections into passages, with input checks that explain themselves.

Three shapes are accepted: our benchmark format (a JSON list of ``{title, text}``; the
position is the passage id), JSONL with the same fields, and a folder of ``.txt`` /
``.md`` files (one passage per file, titled by the file name, in sorted path order).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import UserError

TEXT_SUFFIXES = (".txt", ".md")
ELISION = "..."  # between sentences of an excerpt that are not adjacent


@dataclass(frozen=True)
class Passage:
    id: int
    title: str
    text: str

    @property
    def content_hash(self) -> str:
        """Identity of the content, independent of position: keys reusable work."""
        return hashlib.sha256(f"{self.title}\x00{self.text}".encode()).hexdigest()


def fingerprint(passages: list[Passage]) -> str:
    """Fingerprint of the whole ordered corpus: unchanged iff this is unchanged."""
    digest = hashlib.sha256()
    for p in passages:
        digest.update(p.content_hash.encode())
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


def _from_folder(path: Path) -> list[tuple[str, str]]:
    try:
        files = sorted(
            f for f in path.rglob("*") if f.suffix.lower() in TEXT_SUFFIXES and f.is_file()
        )
    except PermissionError:
        raise UserError(f"folder {path} cannot be read (permission denied)") from None
    if not files:
        raise UserError(f"folder {path} holds no .txt or .md files")
    return [(str(f.relative_to(path).with_suffix("")), _read_text(f)) for f in files]


def load_corpus(path: Path) -> list[Passage]:
    """Passages of a corpus file or folder; raises `UserError` on anything malformed."""
    path = Path(path).expanduser()
    if not path.exists():
        raise UserError(f"corpus {path} does not exist")
    if path.is_dir():
        records = _from_folder(path)
    elif path.suffix.lower() == ".jsonl":
        records = _from_jsonl(path)
    elif path.suffix.lower() == ".json":
        records = _from_json(path)
    elif path.suffix.lower() in TEXT_SUFFIXES:
        records = [(path.stem, _read_text(path))]
    else:
        raise UserError(
            f"{path} is not a corpus hoprag can read",
            hint="use a .json list, a .jsonl file, or a folder of .txt/.md files",
        )
    passages = [Passage(i, title.strip(), text.strip()) for i, (title, text) in enumerate(records)]
    if not any(p.text for p in passages):
        raise UserError(f"corpus {path} is empty (no passage has any text)")
    return passages


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
