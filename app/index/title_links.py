"""Title links between passages.

A later hop's passage is rarely named in the question but usually in an earlier hop's
text, by its title (the corpora are Wikipedia-like). Both DM_direct's features and the
direct answer's reading follow these links.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from app.settings import MIN_TITLE_CHARS


def title_key(passage: str) -> str:
    """A "title: text" passage's title, lower-cased, without its "(disambiguation)"."""
    title = passage.partition(": ")[0]
    return re.sub(r"\s*\(.*?\)", "", title).strip().lower()


def title_links(passages: Sequence[str]) -> np.ndarray:
    """links[i, j] is True when passage j's title occurs in passage i's text."""
    titles = [title_key(p) for p in passages]
    bodies = [p.partition(": ")[2].lower() for p in passages]
    return np.array(
        [
            [
                i != j and len(titles[j]) >= MIN_TITLE_CHARS and titles[j] in body
                for j in range(len(passages))
            ]
            for i, body in enumerate(bodies)
        ],
        dtype=bool,
    ).reshape(len(passages), len(passages))


def titles_named(question: str, passages: Sequence[str]) -> int:
    """How many of the passages' titles the question names."""
    lowered = question.lower()
    return sum(len(t) >= MIN_TITLE_CHARS and t in lowered for t in map(title_key, passages))


def linked_from(passages: Sequence[str], chosen: Sequence[int], limit: int) -> list[int]:
    """At most `limit` passages, outside `chosen`, that a chosen passage names by title,
    in their given (retrieval) order."""
    links = title_links(passages)
    reached = links[list(chosen)].any(axis=0) if len(chosen) else np.zeros(len(passages), bool)
    return [j for j in range(len(passages)) if reached[j] and j not in chosen][:limit]
