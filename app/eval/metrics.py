"""Answer metrics (docs/method.md section 5): SQuAD-normalised EM and token F1, contain accuracy,
evidence-chain coverage, and McNemar's exact test for paired systems."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from tools.answer_rules import normalize_answer  # SQuAD normalisation, a rule of tools/


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in golds))


def _f1(prediction: str, gold: str) -> float:
    pred_tokens, gold_tokens = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    return max((_f1(prediction, g) for g in golds), default=0.0)


def contain_match(prediction: str, golds: Sequence[str]) -> float:
    """1 if some normalised gold answer is a substring of the normalised prediction."""
    pred = normalize_answer(prediction)
    return float(any(normalize_answer(g) and normalize_answer(g) in pred for g in golds))


def chain_covered(fed_ids: Iterable[int], gold_ids: Iterable[int]) -> float:
    """1 if every gold passage was among the passages fed to the reader."""
    return float(set(gold_ids) <= set(fed_ids))


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts (binomial, p=1/2)."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    k = min(a_only, b_only)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def prompt_reuse(costs: Iterable[dict[str, Any]]) -> float | None:
    """The share of input tokens the server reused from its prompt cache instead of
    reading (None for runs recorded before it was metered)."""
    rows = [c for c in costs if c.get("cached_tokens") is not None]
    total = sum(c["input_tokens"] for c in rows)
    return round(sum(c["cached_tokens"] for c in rows) / total, 4) if total else None
