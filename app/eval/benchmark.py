"""Reading benchmark questions (our normalised format) with checks that run before any
model loads: missing fields, wrong types, duplicate or unknown ids, gold indices out of
the corpus's range."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.errors import UserError


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answer: str
    aliases: tuple[str, ...] = ()
    gold_ids: tuple[int, ...] = ()
    split: str = ""
    group: str = ""  # hop count or question type, for per-group tables
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def golds(self) -> list[str]:
        return [self.answer, *self.aliases]


def _group(item: dict[str, Any]) -> str:
    if "hops" in item:
        return f"{item['hops']}-hop"
    return str(item.get("type", ""))


def _question(item: Any, where: str) -> Question:
    if not isinstance(item, dict):
        raise UserError(f"{where}: expected an object, got {type(item).__name__}")
    missing = [k for k in ("id", "question", "answer") if k not in item]
    if missing:
        raise UserError(
            f"{where}: missing field {', '.join(repr(k) for k in missing)}",
            hint="each question needs 'id', 'question' and 'answer'",
        )
    if not isinstance(item["question"], str) or not item["question"].strip():
        raise UserError(f"{where}: 'question' must be a non-empty string")
    if not isinstance(item["answer"], str):
        raise UserError(f"{where}: 'answer' must be a string")
    aliases = item.get("answer_aliases") or []
    gold = item.get("gold_corpus_idx") or []
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise UserError(f"{where}: 'answer_aliases' must be a list of strings")
    if not isinstance(gold, list) or not all(isinstance(i, int) and i >= 0 for i in gold):
        raise UserError(f"{where}: 'gold_corpus_idx' must be a list of passage positions")
    return Question(
        id=str(item["id"]),
        question=item["question"].strip(),
        answer=item["answer"],
        aliases=tuple(aliases),
        gold_ids=tuple(gold),
        split=str(item.get("split", "")),
        group=_group(item),
        extra=item,
    )


def load_questions(
    path: Path,
    *,
    split: str | None = None,
    ids_file: Path | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> list[Question]:
    """Questions of a benchmark file, filtered by split and an ids file, then the first
    `offset` skipped and at most `limit` kept (in order): an offset names a slice held
    apart from the first questions, such as a validation slice."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError(f"questions file {path} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(data, list):
        raise UserError(f"{path} holds a JSON {type(data).__name__}, not a list of questions")
    questions = [_question(item, f"{path} item {i}") for i, item in enumerate(data)]
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            raise UserError(f"{path}: question id {q.id!r} appears twice")
        seen.add(q.id)
    if split:
        questions = [q for q in questions if q.split == split]
        if not questions:
            raise UserError(f"{path} has no questions with split {split!r}")
    if ids_file is not None:
        wanted = _read_ids(ids_file)
        unknown = [i for i in wanted if i not in seen]
        if unknown:
            raise UserError(
                f"{len(unknown)} id(s) in {ids_file} are not in {path}: {', '.join(unknown[:5])}"
            )
        keep = set(wanted)
        questions = [q for q in questions if q.id in keep]
    if offset and offset >= len(questions):
        raise UserError(f"--offset {offset} skips all {len(questions)} questions of {path}")
    questions = questions[offset:]
    return questions[:limit] if limit else questions


def _read_ids(path: Path) -> list[str]:
    if not Path(path).is_file():
        raise UserError(f"ids file {path} does not exist")
    text = Path(path).read_text(encoding="utf-8").strip()
    if text.startswith("["):
        try:
            return [str(i) for i in json.loads(text)]
        except json.JSONDecodeError as exc:
            raise UserError(f"ids file {path} is not valid JSON ({exc.msg})") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def check_gold_in_range(questions: list[Question], corpus_size: int, source: str) -> None:
    for q in questions:
        bad = [i for i in q.gold_ids if i >= corpus_size]
        if bad:
            raise UserError(
                f"question {q.id!r} names gold passage {bad[0]}, but {source} has only "
                f"{corpus_size} passages",
                hint="are the questions and the corpus a pair?",
            )
