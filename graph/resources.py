"""Models and stores, created once per process and injected into graph builders."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from functools import cache

from app.dm.features import DM_DIR
from app.encoders.embeddings import Embedder
from app.index.store import CorpusIndex
from app.llm.gateway import LLMGateway
from app.settings import Settings
from tools.decision import DecisionModel, TrainedDM
from tools.examples import ExampleBank
from tools.qa_cache import QACache
from tools.retriever import Retriever
from tools.sentence_graph import SentenceGraph


@dataclass(frozen=True)
class Models:
    """What every index of a process shares: one chat model (one embedded llama-server),
    one embedder, one trained DM and one bank of worked examples."""

    gateway: LLMGateway
    embedder: Embedder
    trained: TrainedDM | None
    examples: ExampleBank

    @classmethod
    def load(cls, settings: Settings) -> Models:
        embedder = Embedder(settings.runtime_dir)
        trained = (
            TrainedDM.load(DM_DIR, settings.runtime_dir, embedder) if settings.trained_dm else None
        )
        return cls(LLMGateway(settings), embedder, trained, ExampleBank(embedder))


@dataclass
class Resources:
    settings: Settings
    gateway: LLMGateway
    index: CorpusIndex
    retriever: Retriever
    dm: DecisionModel
    qa_cache: QACache
    examples: ExampleBank
    sentence_graph: SentenceGraph | None = None

    @classmethod
    def open(cls, settings: Settings, index_name: str, models: Models | None = None) -> Resources:
        """Open the index first (cheap, fails fast on a bad name), then load the models
        unless a process's shared `models` are given."""
        index = CorpusIndex.open(settings, index_name)
        return cls._over(settings, index, models or Models.load(settings))

    @classmethod
    def _over(cls, settings: Settings, index: CorpusIndex, models: Models) -> Resources:
        """The models put together with the stores of one opened index."""
        cache = QACache.open(settings, index.name, index.manifest["fingerprint"], models.embedder)
        dm = DecisionModel(models.gateway, models.embedder, index=index, trained=models.trained)
        return cls(
            settings,
            models.gateway,
            index,
            Retriever(index, models.embedder, settings.retrieval),
            dm,
            cache,
            models.examples,
            SentenceGraph.open(index, models.embedder, dm),
        )

    @property
    def models(self) -> Models:
        return Models(self.gateway, self.retriever.embedder, self.dm.trained, self.examples)

    def reopened(self) -> Resources:
        """The same models over the index's current version, for a server whose index
        was rebuilt; these resources are left as they are to the runs still using them."""
        index = CorpusIndex.open(self.settings, self.index.name)
        return self._over(self.settings, index, self.models)

    def close(self) -> None:
        self.gateway.close()
        self.qa_cache.close()
        self.index.close()


@dataclass
class ResourcePool:
    """Resources per index for a long-lived server: each opened once per process, by the
    first run that needs it, in a worker thread so that the event loop never blocks on
    model loading (concurrent first runs wait for the same opening). Every index shares
    the process's models, so a new `configurable.index` opens stores, not another chat
    model server. A run that finds the index's link pointing at another version
    (`hoprag index` or `graph build` wrote one) gets that version's stores."""

    settings: Settings
    _opened: dict[str, Resources] = field(default_factory=dict)
    _models: Models | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, index: str) -> Resources:
        with self._lock:
            opened = self._opened.get(index)
            if opened is None:
                settings = self.settings.with_overrides(index=index)
                opened = Resources.open(settings, index, self._models)
                self._models = opened.models
            elif opened.index.path != (self.settings.indexes_dir / index).resolve():
                opened = opened.reopened()
            self._opened[index] = opened
            return opened

    async def aget(self, index: str) -> Resources:
        return await asyncio.to_thread(self.get, index)


@cache
def server_pool() -> ResourcePool:
    """The server process's one pool. It lives here, not in graph/server.py, because the
    server loads that file once per graph of langgraph.json, as separate modules."""
    return ResourcePool(Settings())
