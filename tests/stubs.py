"""Stand-ins shared by the tests that run single nodes outside a graph."""

from __future__ import annotations

from typing import Any

from app.settings import Settings


class Runtime:
    """What a node reads from LangGraph's runtime: the run's settings as `context`."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.context = settings or Settings()


class ScriptedWriter:
    """A chat model that gives the scripted replies, one per call, and keeps the last
    message it was sent."""

    def __init__(self, *replies: str) -> None:
        self.replies, self.last = list(replies), ""

    def invoke(self, messages: list[Any], max_tokens: int | None = None) -> str:
        self.last = messages[-1].content
        return self.replies.pop(0)


class NoExamples:
    """An example bank with nothing to show."""

    def render(self, question: str, k: int) -> str:
        return ""

    def render_decompositions(self, question: str, k: int) -> str:
        return ""
