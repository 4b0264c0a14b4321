"""BM25 over passages with bm25s: English stop words, Snowball stemming, saved vocabulary."""

from __future__ import annotations

from pathlib import Path

import bm25s
import numpy as np
import Stemmer


def _tokenizer() -> bm25s.tokenization.Tokenizer:
    return bm25s.tokenization.Tokenizer(stopwords="en", stemmer=Stemmer.Stemmer("english"))


def build_bm25(texts: list[str], folder: Path) -> None:
    """Index `texts` (position = passage id) and save index and vocabulary to `folder`."""
    tokenizer = _tokenizer()
    tokens = tokenizer.tokenize(texts, update_vocab=True, show_progress=False, return_as="tuple")
    model = bm25s.BM25()
    model.index(tokens, show_progress=False)
    model.save(str(folder))
    tokenizer.save_vocab(str(folder))


class BM25Index:
    """A saved bm25s index, loaded once (memory-mapped) and queried many times."""

    def __init__(self, folder: Path) -> None:
        self.model = bm25s.BM25.load(str(folder), mmap=True)
        self.tokenizer = _tokenizer()
        self.tokenizer.load_vocab(str(folder))
        self.size = int(self.model.scores["num_docs"])

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """(passage id, score) best first; empty when no query word is in the corpus."""
        ids = self.tokenizer.tokenize([query], update_vocab=False, show_progress=False)
        k = min(k, self.size)
        if k <= 0:
            return []
        docs, scores = self.model.retrieve(ids, k=k, show_progress=False, n_threads=1)
        return [
            (int(d), float(s))
            for d, s in zip(docs[0], scores[0], strict=True)
            if s > 0 and np.isfinite(s)
        ]
