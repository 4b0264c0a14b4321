"""Other wordings of relation questions, written by the chat model, for DM_same's
training pairs (`hoprag dm rewordings`, kept in `app/data/dm_rewordings.json`).

`hoprag dm data` phrases each 2WikiMultihopQA evidence triple with one template per
relation (`prompts/relation_questions.json`), so the pairs it can build from templates
alone reword a relation one way only. Here the chat model rewords one question per
relation and split (`prompts/reword_question.md`); each wording that names the subject
exactly becomes a template over `{s}`, applied to every subject of that relation. Train
and dev are reworded in separate calls, each from a subject of its own split, so dev
pairs do not reuse the wordings the DM was trained on unless the model repeats itself.
A person then removed the wordings that ask for another fact ("Who gave birth to X?" for
a father); the file keeps them under `removed`, and a rerun drops them again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.dm.data import REWORDINGS_FILE, SPLITS, load_items
from app.traindata import named_subject, phrase_relation
from prompts import load_prompt

REWORDINGS_PER_RELATION = 4  # what the prompt asks for; more lines are dropped
REWORDING_TOKENS = 120  # four short questions
_LIST_MARK = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|Question:)\s*")
_NORMALISE = re.compile(r"[^a-z0-9{} ]+")


def first_subjects(data_dir: Path, split: str) -> dict[str, str]:
    """Each relation of the split's 2WikiMultihopQA evidence triples, with the subject of
    its first triple (in question order), sorted by relation."""
    subjects: dict[str, str] = {}
    for item in load_items(data_dir, "2wikimultihopqa", split):
        for subject, relation, _ in item.triples:
            subjects.setdefault(relation, subject)
    return dict(sorted(subjects.items()))


def _key(text: str) -> str:
    return " ".join(_NORMALISE.sub(" ", text.lower()).split())


def templates_from(reply: str, subject: str, relation: str) -> list[str]:
    """The reply's wordings as templates over `{s}`: one per line, each naming `subject`
    exactly and ending in "?", none a repeat of another or of the relation's own
    template or plain form (the pairs `same_examples` already has)."""
    seen = {
        _key(phrase_relation("{s}", relation)),
        _key(f"What is the {relation} of {{s}}?"),
        _key(f"What is {{s}}'s {relation}?"),
    }
    templates: list[str] = []
    for line in reply.splitlines():
        text = _LIST_MARK.sub("", line).strip().strip('"').strip()
        if subject not in text or not text.endswith("?"):
            continue
        template = text.replace("{", "{{").replace("}", "}}").replace(subject, "{s}")
        if _key(template) in seen:
            continue
        seen.add(_key(template))
        templates.append(template)
    return templates[:REWORDINGS_PER_RELATION]


def reword(invoke: Callable[[Any], str], subject: str, relation: str) -> list[str]:
    """The chat model's other wordings of `phrase_relation(subject, relation)`, as
    templates; `invoke` sends chat messages and returns the reply's text."""
    question = phrase_relation(subject, relation)
    reply = invoke(load_prompt("reword_question").format_messages(question=question))
    return templates_from(reply, named_subject(subject), relation)


def build_rewordings(
    data_dir: Path,
    invoke: Callable[[Any], str],
    model: str,
    progress: Callable[[Iterable[Any]], Iterable[Any]] = iter,
    review: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Rewordings of every relation of train and dev, with how they were made. `review`
    (the `reviewed` note and `removed` map of an earlier file) drops the wordings a
    person found to ask for another fact, when the model writes them again."""
    review = review or {}
    removed = review.get("removed") or {}
    out: dict[str, Any] = {
        "_about": "Other wordings of each relation's question by the chat model "
        "(templates over {s}), for DM_same's pairs: `hoprag dm rewordings` wrote this "
        "file, `hoprag dm data` reads it. Train and dev were reworded separately.",
        "made_by": {
            "model": model,
            "prompt": "prompts/reword_question.md",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "subject": "the subject of the relation's first evidence triple in that split",
        },
    }
    for split in SPLITS:
        subjects = first_subjects(data_dir, split)
        out[split] = {
            relation: [
                t
                for t in reword(invoke, subject, relation)
                if t not in removed.get(split, {}).get(relation, [])
            ]
            for relation, subject in progress(subjects.items())
        }
    if removed:
        out["made_by"]["reviewed"] = review.get("reviewed", "")
        out["removed"] = removed
    return out


def read_review(path: Path = REWORDINGS_FILE) -> dict[str, Any]:
    """The review of the file at `path` (see `build_rewordings`); none when missing."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {"reviewed": data.get("made_by", {}).get("reviewed"), "removed": data.get("removed")}


def write_rewordings(rewordings: dict[str, Any], path: Path = REWORDINGS_FILE) -> None:
    path.write_text(json.dumps(rewordings, indent=2, ensure_ascii=False) + "\n")
