"""The embedder's fast runtime gives the torch model's vectors, is built only once, and serves
concurrent runs."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from app.encoders.embeddings import Embedder

TEXTS = [
    "The Ulden River flows through Brisk Hollow.",
    "Tavistrom College was founded by Augustin Reyvald in 1862.",
    "word " * 600,  # longer than the window: cut, as sentence-transformers cuts it
    "Kraków",
]


def test_fast_vectors_match_the_torch_model(embedder: Embedder, settings) -> None:
    assert embedder.session is not None
    torch_only = Embedder()
    fast, reference = embedder.embed(TEXTS), torch_only.embed(TEXTS)
    assert fast.shape == reference.shape == (len(TEXTS), embedder.dim)
    assert np.abs(fast - reference).max() < 1e-4
    assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    built = sorted(Path(settings.runtime_dir).glob("minilm-*.onnx"))
    assert len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    Embedder(settings.runtime_dir)  # a second process start reuses the runtime
    assert built[0].stat().st_mtime_ns == stamp
    assert embedder.embed([]).shape == (0, embedder.dim)


def test_concurrent_runs_share_the_tokenizer(embedder: Embedder) -> None:
    """The server's runs embed at once through one tokenizer: none fails, and each gets
    the vectors it would get alone."""
    alone = embedder.embed(TEXTS)
    errors: list[str] = []

    def embed_often() -> None:
        try:
            for _ in range(5):
                assert np.array_equal(embedder.embed(TEXTS), alone)
        except Exception as exc:  # "Already borrowed" from the shared tokenizer
            errors.append(repr(exc))

    threads = [threading.Thread(target=embed_often) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
