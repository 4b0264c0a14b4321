"""Models and stores, created once per process and injected into graph builders."""

from __future__ import annotations

from dataclasses import dataclass

from app.embeddings import Embedder
from app.llm import LLMGateway
from app.settings import Settings
from app.store import CorpusIndex
from tools.retriever import Retriever


@dataclass
class Resources:
    settings: Settings
    gateway: LLMGateway
    index: CorpusIndex
    retriever: Retriever

    @classmethod
    def open(cls, settings: Settings, index_name: str) -> Resources:
        """Open the index first (cheap, fails fast on a bad name), then load models."""
        index = CorpusIndex.open(settings, index_name)
        retriever = Retriever(index, Embedder(), settings.retrieval)
        return cls(settings, LLMGateway(settings), index, retriever)

    def close(self) -> None:
        self.gateway.close()
        self.index.close()
