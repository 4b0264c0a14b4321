"""Checks of what a user typed (a question, a system, an index name), made before any
model, store or graph loads: a mistake costs a fraction of a second and gets a clear
message. Standard library only, so that importing this module stays cheap."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from app.errors import UserError
from app.settings import BENCHMARKS, MAX_QUESTION_CHARS, QA_CACHE_SUFFIX, SYSTEM_NAMES, Settings

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def clean_question(text: str) -> str:
    """Control characters dropped and whitespace collapsed."""
    printable = "".join(ch if ch.isprintable() else " " for ch in text)
    return " ".join(printable.split())


def check_question(question: str) -> str:
    """The question as the graph will see it, refused here before any model loads."""
    question = clean_question(question)
    if not question:
        raise UserError("the question is empty", hint='ask e.g. hoprag ask "Who ...?" -i NAME')
    if len(question) > MAX_QUESTION_CHARS:
        raise UserError(
            f"the question is too long ({len(question)} characters; at most {MAX_QUESTION_CHARS})",
            hint="ask it more briefly",
        )
    return question


def check_system(name: str) -> str:
    if name not in SYSTEM_NAMES:
        raise UserError(
            f"unknown system {name!r}", hint=f"choose one of: {', '.join(SYSTEM_NAMES)}"
        )
    return name


def check_name(name: str) -> str:
    """An index name that is a file name in the indexes folder and no other file's."""
    if not NAME_RE.fullmatch(name or ""):
        raise UserError(
            f"{name!r} is not a valid index name",
            hint="use 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit",
        )
    if QA_CACHE_SUFFIX in name:
        raise UserError(
            f"{name!r} is not a valid index name",
            hint=f"names with {QA_CACHE_SUFFIX!r} in them are taken by the indexes' QA caches",
        )
    return name


def list_indexes(settings: Settings) -> list[str]:
    root = settings.indexes_dir
    if not root.is_dir():
        return []
    return sorted(
        p.name
        for p in root.iterdir()
        if (p / "manifest.json").is_file() and not p.name.startswith(".")
    )


def require_index(settings: Settings, name: str) -> str:
    """An index of that name exists (its manifest is there)."""
    if not (settings.indexes_dir / check_name(name) / "manifest.json").is_file():
        known = ", ".join(list_indexes(settings)) or "none yet"
        raise UserError(
            f"no index named {name!r} in {settings.indexes_dir}",
            hint=f"build it with `hoprag index PATH --name {name}` (existing: {known})",
        )
    return name


def check_benchmarks(folder: Path, names: Sequence[str] = BENCHMARKS) -> Path:
    """The benchmark folder (HOPRAG_DATA), refused with what to do when a benchmark's
    files are not there: users have no benchmarks until they put them somewhere."""
    for name in names:
        for file in ("questions.json", "corpus.json"):
            if not (folder / name / file).is_file():
                raise UserError(
                    f"no benchmark data: {folder / name / file} does not exist",
                    hint="set HOPRAG_DATA (or --data) to the folder holding "
                    f"{', '.join(f'{n}/' for n in names)} each with questions.json and "
                    'corpus.json (docs/guide.md, "Benchmark data")',
                )
    return folder
