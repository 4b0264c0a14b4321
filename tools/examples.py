"""Worked examples for the sub-question writer, chosen per question from training data.

A 1.5B model imitates far better than it follows rules: shown how questions *like this
one* were broken down, it writes the next sub-question in the same way. The bank holds
the gold decompositions of training questions (`app/traindata.py`); the most similar
ones are shown whole, in the same self-ask form as the question's own known facts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.encoders.embeddings import Embedder
from app.errors import ServiceError
from app.settings import WRITER_EXAMPLE_RELEVANCE
from app.traindata import EXAMPLES_FILE


def render_steps(steps: Sequence[tuple[str, str]]) -> str:
    """Sub-questions and answers as the writer's prompt shows them (self-ask style)."""
    return "\n".join(f"Simple question: {q}\nAnswer: {a}" for q, a in steps)


@dataclass(frozen=True)
class WorkedExample:
    question: str
    steps: tuple[tuple[str, str], ...]
    templated: tuple[str, ...] = ()

    def render(self) -> str:
        return f"Complex question: {self.question}\n{render_steps(self.steps)}"

    def render_decomposition(self) -> str:
        """The whole plan at once, "#k" standing for the answer to sub-question k."""
        lines = "\n".join(f"{k}. {q}" for k, q in enumerate(self.templated, 1))
        return f"Complex question: {self.question}\nSub-questions:\n{lines}"


class ExampleBank:
    """Gold chains of training questions, searchable by question similarity."""

    def __init__(self, embedder: Embedder, path: Path = EXAMPLES_FILE) -> None:
        try:
            chains = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ServiceError(
                f"cannot read the sub-question examples {path}: {exc}",
                hint="reinstall hoprag, or rebuild the file with `python -m app.traindata`",
            ) from None
        self.questions = [c["question"] for c in chains]
        self.steps = [[tuple(step) for step in c["steps"]] for c in chains]
        self.templated = [list(c.get("templated") or []) for c in chains]
        self.embedder = embedder
        self._vectors: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.questions)

    @property
    def vectors(self) -> np.ndarray:
        if self._vectors is None:  # embedded on first use, once per process
            self._vectors = self.embedder.embed(self.questions)
        return self._vectors

    def select(self, question: str, k: int) -> list[WorkedExample]:
        """`k` similar training questions with their gold chains, picked by maximal
        marginal relevance; the first pick (the most similar) comes last, next to the
        question it is an example for."""
        if not self.questions or k <= 0:
            return []
        scores = self.vectors @ self.embedder.embed([question])[0]
        picked: list[int] = []
        for _ in range(min(k, len(self.questions))):
            redundancy = (
                (self.vectors @ self.vectors[picked].T).max(axis=1)
                if picked
                else np.zeros_like(scores)
            )
            mmr = WRITER_EXAMPLE_RELEVANCE * scores - (1 - WRITER_EXAMPLE_RELEVANCE) * redundancy
            mmr[picked] = -np.inf
            picked.append(int(np.argmax(mmr)))
        return [
            WorkedExample(self.questions[i], tuple(self.steps[i]), tuple(self.templated[i]))
            for i in picked[::-1]
        ]

    def render(self, question: str, k: int) -> str:
        return "\n\n".join(e.render() for e in self.select(question, k))

    def render_decompositions(self, question: str, k: int) -> str:
        return "\n\n".join(e.render_decomposition() for e in self.select(question, k))
