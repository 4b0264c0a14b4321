"""Platt scaling, the one calibration every DM backend shares: p = sigmoid(a * x + b)
over a logit or a raw score, fitted by logistic regression on one feature."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_EPS = 1e-6


def logit(p: float) -> float:
    p = min(max(p, _EPS), 1 - _EPS)
    return math.log(p / (1 - p))


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


@dataclass(frozen=True)
class Platt:
    """p = sigmoid(a * x + b), where x is the logit of a raw p(yes) or a raw score."""

    a: float = 1.0
    b: float = 0.0

    def __call__(self, x: float) -> float:
        return sigmoid(self.a * x + self.b)


def fit_platt(
    xs: Sequence[float], ys: Sequence[int], *, iterations: int = 200, l2: float = 1e-3
) -> Platt:
    """Logistic regression on one feature by Newton's method (tiny, exact, no sklearn)."""
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    w = np.zeros(2)
    design = np.stack([x, np.ones_like(x)], axis=1)
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-(design @ w)))
        grad = design.T @ (p - y) + l2 * w
        hess = design.T @ (design * (p * (1 - p))[:, None]) + l2 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return Platt(float(w[0]), float(w[1]))
