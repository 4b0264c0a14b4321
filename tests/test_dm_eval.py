"""DM quality metrics against hand-computed cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.dm import eval as dm_eval
from app.dm.data import DMExample
from app.dm.eval import accuracy_at, auc, ece, reliability, reliability_diagram


def test_auc_counts_ordered_pairs_and_half_ties() -> None:
    # positives 0.9, 0.4; negatives 0.4, 0.1: pairs (0.9>0.4, 0.9>0.1, 0.4=0.4, 0.4>0.1)
    assert auc([0.9, 0.4, 0.4, 0.1], [1, 1, 0, 0]) == pytest.approx(3.5 / 4)
    assert auc([0.1, 0.9], [1, 0]) == 0.0
    assert auc([0.3, 0.6], [1, 1]) is None


def test_ece_and_reliability_bins() -> None:
    # bin [0.2, 0.3): p 0.2, 0.2 with one yes -> |0.2 - 0.5| ; bin [0.9, 1]: p 0.9, 1 yes -> 0.1
    probabilities, labels = [0.2, 0.2, 0.9], [1, 0, 1]
    assert reliability(probabilities, labels) == [
        (pytest.approx(0.2), 0.5, 2),
        (pytest.approx(0.9), 1.0, 1),
    ]
    assert ece(probabilities, labels) == pytest.approx((2 * 0.3 + 1 * 0.1) / 3)
    assert ece([1.0, 0.0], [1, 0]) == 0.0


def test_accuracy_at_threshold() -> None:
    assert accuracy_at([0.5, 0.49, 0.8], [1, 1, 0], 0.5) == pytest.approx(1 / 3)


def test_reliability_diagram_is_a_png(tmp_path: Path) -> None:
    out = reliability_diagram({"a": ([0.1, 0.8, 0.9], [0, 1, 1])}, "rel", tmp_path / "rel.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rel_is_broken_down_by_the_query_it_was_judged_against() -> None:
    labelled = [("question", 1), ("question", 0), ("sub-question", 1), ("sub-question", 0)]
    rows = [
        DMExample("rel", "q", "p", label, "how", "musique", extra={"query": query})
        for query, label in [*labelled, ("other", 1)]
    ]
    # trained: ranks sub-question rows right and question rows wrong; zero-shot: flat
    report = dm_eval.by_query(rows, [0.2, 0.8, 0.9, 0.1, 0.5], [0.5] * 5, 0.5)
    assert set(report) == {"other", "question", "sub-question"}
    assert report["sub-question"]["trained"]["auc"] == 1.0
    assert report["question"]["trained"]["auc"] == 0.0
    assert report["question"]["zero_shot"]["auc"] == 0.5
    assert report["other"]["trained"]["auc"] is None
    assert report["sub-question"]["trained"]["n"] == 2


def test_the_trained_dm_takes_a_kind_only_where_it_ranks_well_and_better() -> None:
    def row(trained: float, zero_shot: float | None, paired: float | None = None) -> dict:
        r = {"trained": {"auc": trained}, "zero_shot": {"auc": zero_shot}}
        return r if paired is None else {**r, "trained_paired": {"auc": paired}}

    report = {
        "rel": row(0.90, 0.64),  # better and good: trained
        "direct": row(0.65, 0.50),  # better than an abstaining zero-shot, but weak: not
        "same": row(0.986, 0.996, paired=0.99),  # worse on the same examples: not
        "suff": row(0.99, None),  # zero-shot unmeasured counts as chance: trained
        # lower over all of dev, but at least as good on the zero-shot's examples: trained
        "depth": row(0.94, 0.97, paired=0.98),
        "rel_latency_ms": {"median": 10.0},
    }
    assert dm_eval.trained_kinds(report) == ["rel", "suff", "depth"]
    report["same"] = row(1.0, 0.99, paired=1.0)  # better on the same examples: trained
    assert dm_eval.trained_kinds(report) == ["rel", "same", "suff", "depth"]


def test_evaluating_some_kinds_keeps_the_rest_of_the_earlier_report() -> None:
    def row(auc: float) -> dict:
        return {"trained": {"auc": auc}, "zero_shot": {"auc": 0.5}}

    earlier = {
        "rel": row(0.96),
        "same": row(0.99),
        "use_for": ["rel", "same"],
        "date": "2026-11-01",
        "command": "hoprag dm eval",
    }
    report, use_for = dm_eval.merged(
        earlier, {"sent": row(0.85), "same": row(0.6)}, ["sent", "same"], ["rel", "same"]
    )
    assert report["rel"] == earlier["rel"] and report["same"] == row(0.6)
    assert report["command"] == ["hoprag dm eval"] and "date" not in report
    assert use_for == ["rel", "sent"]  # same re-evaluated and lost; rel kept as it was
