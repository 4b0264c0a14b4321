"""Prompts are data: one Markdown file per prompt, with `## system`, `## user` and (for
worked examples shown as earlier chat turns) `## assistant` parts, ending with `## user`;
single lines that code adds to a prompt live in JSON files (`load_lines`), word lists
in text files (`load_words`).

Templates use `{name}` placeholders (LangChain f-string templates); literal braces in a
prompt are written `{{` and `}}`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from langchain_core.prompts import ChatPromptTemplate

PROMPT_DIR = Path(__file__).parent
_SECTION = re.compile(r"^## (system|user|assistant)\s*$", re.MULTILINE)
_ROLES = {"system": "system", "user": "human", "assistant": "ai"}
_YES_NO_QUESTION = re.compile(
    r"^\W*(is|are|was|were|do|does|did|has|have|had|can|could|will|would)\b", re.IGNORECASE
)


@cache
def load_prompt(name: str) -> ChatPromptTemplate:
    """The chat prompt stored in `prompts/NAME.md`."""
    text = (PROMPT_DIR / f"{name}.md").read_text(encoding="utf-8")
    parts = _SECTION.split(text)
    messages = [(role, body.strip()) for role, body in zip(parts[1::2], parts[2::2], strict=True)]
    if not messages or messages[-1][0] != "user":
        raise ValueError(f"prompt {name!r} must end with a '## user' section")
    return ChatPromptTemplate.from_messages([(_ROLES[role], body) for role, body in messages])


def one_line(text: str) -> str:
    """`text` with every run of white space, line breaks included, as one space."""
    return " ".join(text.split())


def format_passages(passages: Sequence[dict[str, Any]]) -> str:
    """Numbered passages, `[i] Title: text`, as every reader prompt shows them: one line
    each, so that no text inside a passage starts a prompt line of its own (a forged
    "Answer:" line or QA-table row, issue 55)."""
    return "\n".join(
        f"[{i}] {one_line(p['title'])}: {one_line(p['text'])}" for i, p in enumerate(passages, 1)
    )


def format_qa_table(rows: Sequence[dict[str, Any]]) -> str:
    """The QA table as prompts show it: one `- sub-question answer` line per row."""
    lines = (f"- {one_line(r['sub_question'])} {one_line(r['answer'])}" for r in rows)
    return "\n".join(lines) or "(none yet)"


def is_yes_no_question(question: str) -> bool:
    """A question that asks whether something is so: it opens with an auxiliary verb
    ("Are both ...?", "Did ... share ...?")."""
    return bool(_YES_NO_QUESTION.match(question))


@cache
def load_lines(name: str) -> dict[str, str]:
    """Named prompt lines stored in `prompts/NAME.json` (each file says what they are for
    under `_about`)."""
    return json.loads((PROMPT_DIR / f"{name}.json").read_text(encoding="utf-8"))


@cache
def load_words(name: str) -> frozenset[str]:
    """A word list stored in `prompts/NAME.txt`: one word a line, `#` starts a comment."""
    lines = (PROMPT_DIR / f"{name}.txt").read_text(encoding="utf-8").splitlines()
    return frozenset(line for line in lines if line and not line.startswith("#"))


def reply_form(question: str) -> str:
    """The `{reply_form}` of a reader prompt: one more instruction line for a yes/no question
    (`prompts/reply_forms.json`), else nothing, so other questions see the prompt unchanged.
    Without it the 1.5B reader answered "3" to "Do the operas A and B contain the same
    number of acts?"."""
    return "\n" + load_lines("reply_forms")["yes_no"] if is_yes_no_question(question) else ""
