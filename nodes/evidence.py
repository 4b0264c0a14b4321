"""Evidence selection: the step reads the kept passages' best sentences for its
sub-question, not the passages (docs/method.md section 1, step 3.6)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from app.index.store import CorpusIndex
from app.settings import Settings
from graph.state import StepState
from tools.decision import DecisionModel
from tools.evidence import select_sentences


def select_evidence(
    state: StepState, runtime: Runtime[Settings], *, dm: DecisionModel, index: CorpusIndex
) -> dict[str, Any]:
    """The best sentences of the kept passages; with `evidence_selection` off, the kept
    passages whole, as the paper reads them."""
    settings = Settings.of(runtime)
    kept = state.get("kept") or []
    if not settings.rule("evidence_selection"):
        return {"evidence": kept}
    return {
        "evidence": select_sentences(dm, index, state["sub_question"], kept, settings.read_words)
    }
