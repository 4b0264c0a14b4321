"""The decision model (DM): one calibrated p(yes) for every yes/no judgement of the DeFT
graph (docs/method.md section 2), so that fixed thresholds mean what they say.

Backends, chosen per decision kind:

* ``llm``: the chat model's yes/no token probabilities through the gateway (zero-shot
  prompts in ``prompts/dm_*.md``), mapped by a per-kind Platt scaling of the logit
  (a temperature and a bias) fitted on training questions.
* ``off``: the decision always says no, at no cost. Calibration switches a kind off when
  its fitted slope is not positive, i.e. the zero-shot p(yes) carries no signal.
* ``score``: for relevance, the MiniLM cosine between sub-question and passage, mapped by
  a Platt scaling fitted on training questions' gold passages. One batched embedding call
  scores all w passages in milliseconds, where the 1.5B chat model needs about 20 s.

* ``trained``: the fine-tuned MiniLM cross-encoder of `app/dm/` (trained by
  `app/dm/train.py`, served by `app/dm/runtime.py`; LoRA adapter and calibration in
  ``app/data/dm/``), for the kinds its `dm.json` lists under ``use_for``
  (set by measurement against the zero-shot backend). Without a trained DM, or with a
  damaged one (a warning names the file), those kinds use their zero-shot backend.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool

from app.dm.calibration import Platt, logit
from app.dm.features import (
    DIRECT_FEATURES,
    DIRECT_RETRIEVED_FEATURES,
    QUESTION_REL_FEATURES,
    depth_inputs,
    depth_probabilities,
    direct_inputs,
    direct_probability,
    fits,
    whole_question_relevance,
)
from app.dm.runtime import load_runtimes
from app.encoders.embeddings import Embedder
from app.index.corpus import passage_text
from app.index.store import CorpusIndex
from app.llm.gateway import LLMGateway
from prompts import format_passages, format_qa_table, load_prompt

DecisionKind = Literal["rel", "direct", "depth", "suff", "same"]
KINDS: tuple[DecisionKind, ...] = ("rel", "direct", "depth", "suff", "same")
CALIBRATION_FILE = Path(__file__).resolve().parents[1] / "app" / "data" / "dm_calibration.json"


def rel_cosines(
    embedder: Embedder,
    question: str,
    passages: Sequence[dict[str, Any]],
    index: CorpusIndex | None = None,
) -> list[float]:
    """Cosine of the question and each passage (title: text). Passages of `index` reuse
    their stored vectors, so only the question is encoded."""
    if index is not None:
        query = embedder.embed([question])[0]
        return [float(v) for v in index.embeddings([p["id"] for p in passages]) @ query]
    vectors = embedder.embed([question, *(passage_text(p["title"], p["text"]) for p in passages)])
    return [float(v) for v in vectors[1:] @ vectors[0]]


@dataclass
class Calibration:
    """Per-kind backend and Platt parameters, with a note of how they were fitted."""

    backends: dict[str, str] = field(
        default_factory=lambda: {
            "rel": "score",
            "direct": "llm",
            "depth": "llm",
            "suff": "llm",
            "same": "llm",
        }
    )
    platt: dict[str, Platt] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path = CALIBRATION_FILE) -> Calibration:
        if not path.is_file():
            warnings.warn(
                f"no DM calibration at {path}; p(yes) is uncalibrated "
                "(run `python -m bench.calibrate_dm`)",
                stacklevel=2,
            )
            return cls()
        try:
            data = json.loads(path.read_text())
            return cls(
                backends={**cls().backends, **data.get("backends", {})},
                platt={k: Platt(**v) for k, v in data.get("platt", {}).items()},
                notes=data.get("notes", {}),
            )
        except (json.JSONDecodeError, TypeError, KeyError) as exc:
            warnings.warn(f"DM calibration {path} is damaged ({exc}); using none", stacklevel=2)
            return cls()

    def save(self, path: Path = CALIBRATION_FILE) -> None:
        path.write_text(
            json.dumps(
                {
                    "backends": self.backends,
                    "platt": {k: {"a": v.a, "b": v.b} for k, v in self.platt.items()},
                    "notes": self.notes,
                },
                indent=2,
            )
            + "\n"
        )

    def scale(self, kind: str, x: float) -> float:
        return self.platt.get(kind, Platt())(x)


# What the cross-encoder reads for each kind, from the zero-shot prompts' variables:
# (text_a, text_b) exactly as `app/dm/data.py` built the training pairs.
TRAINED_INPUTS = {
    "depth": lambda v: (v["question"], ""),
    "suff": lambda v: (v["question"], v["qa_table"]),
    "same": lambda v: (v["first"], v["second"]),
}


class TrainedDM:
    """The fine-tuned cross-encoders (one adapter for the passage kinds, one for `same`):
    loaded once, each scores a batch in one forward pass."""

    def __init__(self, folder: Path, runtime_dir: Path, embedder: Embedder | None = None) -> None:
        self.folder = folder
        self.runtime_dir = runtime_dir
        self.embedder = embedder  # the depth model reads the question's embedding
        self.meta = json.loads((folder / "dm.json").read_text())
        self.encoders = load_runtimes(folder, runtime_dir)
        self.use_for = set(self.meta.get("use_for", []))
        # Both direct models must match ours: the question's top w and gathered text.
        self.direct_fits = fits(self.meta["direct"], DIRECT_RETRIEVED_FEATURES) and fits(
            self.meta.get("direct_gathered"), DIRECT_FEATURES
        )
        # Without one (an older dm.json), whole-question relevance is the per-passage one.
        self.question_rel_fits = fits(self.meta.get("question_rel"), QUESTION_REL_FEATURES)
        if "direct" in self.use_for and not self.direct_fits:
            warnings.warn(
                f"the direct model in {folder / 'dm.json'} was fitted on other features; "
                "the trained DM does not serve `direct` (refit: `hoprag dm calibrate`)",
                stacklevel=2,
            )
            self.use_for.discard("direct")

    @classmethod
    def load(
        cls, folder: Path, runtime_dir: Path, embedder: Embedder | None = None
    ) -> TrainedDM | None:
        """None when no DM was trained; a warning naming the file when it is damaged.
        The fast runtime is built into `runtime_dir` on first use; without `embedder`,
        the depth model loads its own when first asked."""
        if not (folder / "dm.json").is_file():
            return None
        try:
            return cls(folder, runtime_dir, embedder)
        except Exception as exc:  # a damaged adapter must not stop the graph
            warnings.warn(
                f"trained DM in {folder} cannot be loaded ({type(exc).__name__}: {exc}); "
                "using the zero-shot backend",
                stacklevel=2,
            )
            return None

    def p(self, kind: str, pairs: Sequence[tuple[str, str]]) -> list[float]:
        if kind == "depth" and self.meta.get("depth_model"):
            return self.p_shallow([a for a, _ in pairs])
        logits = self.encoders[kind].logits([(kind, a, b) for a, b in pairs])
        platt = Platt(**self.meta["platt"][kind])
        return [platt(float(x)) for x in logits]

    def p_shallow(self, questions: Sequence[str]) -> list[float]:
        """p(at most two hops) from the depth model (fitted by `app.dm.train.fit_depth`), which
        reads the question's embedding beside the adapter's logit."""
        if self.embedder is None:
            self.embedder = Embedder(self.runtime_dir)
        features = depth_inputs(self.encoders["depth"], self.embedder, questions)
        return depth_probabilities(self.meta["depth_model"], features)

    def p_question_rel(self, question: str, passages: Sequence[str]) -> list[float]:
        """Relevance to the whole question of each passage, judged with the batch's title
        links (`app.dm.features.question_rel_features`)."""
        rel = self.p("rel", [(question, t) for t in passages])
        model = self.meta["question_rel"] if self.question_rel_fits else None
        return whole_question_relevance(model, question, passages, rel)

    def p_direct(
        self, question: str, passages: Sequence[str], retrieval: Sequence[float] | None = None
    ) -> float:
        """Passages a retrieval found, with its `retrieval_signals`, are judged by the
        `direct` model; text gathered otherwise by `direct_gathered`. 0 when they were
        fitted on other features (an older `dm.json`)."""
        if not self.direct_fits:
            return 0.0
        features = direct_inputs(
            self.encoders["rel"],
            self.meta["platt"],
            self.meta.get("question_rel", {}),
            question,
            passages,
            retrieval,
        )
        model = self.meta["direct" if retrieval is not None else "direct_gathered"]
        return direct_probability(model, features)


class DecisionModel:
    """Calibrated p(yes) per decision kind; created once and shared by all graph runs."""

    def __init__(
        self,
        gateway: LLMGateway,
        embedder: Embedder,
        calibration: Calibration | None = None,
        index: CorpusIndex | None = None,
        trained: TrainedDM | None = None,
    ) -> None:
        self.gateway = gateway
        self.embedder = embedder
        self.index = index
        self.calibration = calibration or Calibration.load()
        self.trained = trained

    def backend(self, kind: DecisionKind) -> str:
        if self.trained is not None and kind in self.trained.use_for:
            return "trained"
        return self.calibration.backends.get(kind, "llm")

    def _llm(self, kind: DecisionKind, **variables: str) -> float:
        if self.backend(kind) == "off":
            return 0.0
        if self.backend(kind) == "trained" and self.trained is not None:
            a, b = TRAINED_INPUTS[kind](variables)
            return self.trained.p(kind, [(a, b)])[0]
        raw = self.gateway.p_yes(load_prompt(f"dm_{kind}").format_messages(**variables))
        return self.calibration.scale(kind, logit(raw))

    def p_rel(
        self,
        question: str,
        passages: Sequence[dict[str, Any]],
        *,
        stored: bool = True,
        whole_question: bool = False,
    ) -> list[float]:
        """Relevance of every passage to the (sub-)question, scored as one batch.
        Empty passages get 0 without a model call. `stored=False` for texts that are not
        the index's passages (sentences, examples): their vectors are computed.
        `whole_question`: the multi-hop question itself, whose later hops' passages the
        trained DM reaches through the batch's title links."""
        scored = [p for p in passages if p.get("text", "").strip()]
        if not scored or self.backend("rel") == "off":
            return [0.0] * len(passages)
        if self.backend("rel") == "trained" and self.trained is not None:
            texts = [passage_text(p["title"], p["text"]) for p in scored]
            values = iter(
                self.trained.p_question_rel(question, texts)
                if whole_question
                else self.trained.p("rel", [(question, t) for t in texts])
            )
        elif self.backend("rel") == "score":
            values = iter(
                self.calibration.scale("rel", s)
                for s in rel_cosines(
                    self.embedder, question, scored, self.index if stored else None
                )
            )
        else:
            values = iter(
                self._llm("rel", question=question, passage=passage_text(p["title"], p["text"]))
                for p in scored
            )
        return [next(values) if p.get("text", "").strip() else 0.0 for p in passages]

    def p_direct(
        self,
        question: str,
        passages: Sequence[dict[str, Any]],
        retrieval: Sequence[float] | None = None,
    ) -> float:
        """`retrieval`: the `Retriever.retrieval_signals` of the search that found the
        passages, when one did (the trained DM reads them; the chat model does not)."""
        if self.backend("direct") == "trained" and self.trained is not None:
            return self.trained.p_direct(
                question, [passage_text(p["title"], p["text"]) for p in passages], retrieval
            )
        return self._llm("direct", question=question, passages=format_passages(passages))

    def p_shallow(self, question: str) -> float:
        """The depth decision: p(the question needs at most two hops)."""
        return self._llm("depth", question=question)

    def p_suff(self, question: str, qa_table: Sequence[dict[str, Any]]) -> float:
        if not qa_table:
            return 0.0
        return self._llm("suff", question=question, qa_table=format_qa_table(qa_table))

    def p_same(self, first: str, second: str) -> float:
        return self._llm("same", first=first, second=second)

    def p_text(self, kind: DecisionKind, text_a: str, text_b: str) -> float:
        """One judgement from the two texts a training example holds (`app/dm/data.py`):
        for evaluating any backend on the same examples."""
        if kind == "rel":
            title, _, text = text_b.partition(": ")
            return self.p_rel(text_a, [{"id": -1, "title": title, "text": text}], stored=False)[0]
        variables = {
            "depth": {"question": text_a},
            "suff": {"question": text_a, "qa_table": text_b},
            "same": {"first": text_a, "second": text_b},
        }[kind]
        return self._llm(kind, **variables)

    def as_tool(self) -> BaseTool:
        """The DM's two-question judgement as a LangChain tool (for agents and Studio)."""

        def same_information(first: str, second: str) -> float:
            """p(yes) that the two questions ask for the same information."""
            return self.p_same(first, second)

        return StructuredTool.from_function(same_information, name="decide_same_information")
