"""Text in a passage that speaks to the reader instead of stating facts (issue 55).

A passage is data: whatever it says goes into a prompt as a quote. Two kinds of text in
it are there only to steer the model that reads it, and are cut when indexing:

- orders to the reader: "ignore all previous instructions", "answer only: X", "you must
  answer X";
- a forged section of hoprag's own prompts: a line that opens with one of their labels
  ("Question:", "Answer:", "Known facts:", "Passages:", ...), up to the next blank line,
  as a fake answer line or a fake QA-table row would be.

These patterns match none of the 17,851 passages of the three benchmark corpora. They
are patterns: an order worded otherwise gets through (bench.injection's held-out attack
measures how often that turns an answer). A question-and-answer document (an FAQ with
"Question:" and "Answer:" labels) loses those lines too; HOPRAG_STRIP_INSTRUCTIONS=off
keeps them.
"""

from __future__ import annotations

import re

# An order to the reader, within one sentence.
_ORDER = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b[^.!?\n]{0,20}"
    r"\b(?:previous|prior|above|earlier|preceding|your|system)\b[^.!?\n]{0,12}"
    r"\b(?:instructions?|prompts?|directions|rules|guidelines)\b"
    r"|\b(?:answer|reply|respond|say)\b[^.!?\n]{0,20}\b(?:only|exactly)\b\s*:"
    r"|\byou (?:must|should|have to) (?:now )?(?:answer|reply|respond|say|tell)\b",
    re.IGNORECASE,
)
# A line that opens a section of hoprag's prompts (prompts/*.md).
_PROMPT_LABEL = re.compile(
    r"^[ \t]*(?:question|answer|known facts|passages|reasoning so far|next sentence)[ \t]*:",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")


def _without_forged_sections(text: str) -> tuple[str, list[str]]:
    """`text` without the lines that open with a prompt label, each up to the next blank
    line; the removed blocks."""
    kept: list[str] = []
    removed: list[str] = []
    in_forgery = False
    for line in text.splitlines(keepends=True):
        if _PROMPT_LABEL.match(line):
            in_forgery = True
            removed.append(line.strip())
        elif in_forgery and line.strip():
            removed[-1] += " " + line.strip()
        else:
            in_forgery = False
            kept.append(line)
    return "".join(kept), removed


def _without_orders(text: str) -> tuple[str, list[str]]:
    """`text` without the sentences that hold an order to the reader; those sentences."""
    removed: list[str] = []
    while match := _ORDER.search(text):
        ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, match.start())]
        start = ends[-1] if ends else 0
        after = _SENTENCE_END.search(text, match.end())
        end = after.end() if after else len(text)
        removed.append(text[start:end].strip())
        text = text[:start] + text[end:]
    return text, removed


def strip_instructions(text: str) -> tuple[str, list[str]]:
    """`text` without orders to the reader and forged prompt sections (white space
    tidied where something was cut), and what was cut."""
    text_without_sections, sections = _without_forged_sections(text)
    cleaned, orders = _without_orders(text_without_sections)
    removed = sections + orders
    return (" ".join(cleaned.split()) if removed else text), removed
