"""Graph states. Reducers are explicit: `messages` and `thoughts` append, everything else
replaces. A thread keeps its state between runs (chat turns): `fresh_turn` clears
everything but the conversation at the start of each turn."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict, get_args, get_origin, get_type_hints

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.types import Overwrite

from app.index.corpus import excerpt
from tools.records import Decision, QARow


class InputState(TypedDict, total=False):
    """What a caller sends: a question, or a chat whose last human turn is the question.
    `gold_passage_ids` is read only by the oracle reader (evaluation)."""

    question: str
    messages: Annotated[list[AnyMessage], add_messages]
    gold_passage_ids: list[int]


class TurnState(InputState, total=False):
    """One chat turn: the follow-up as asked, when it was rewritten into the self-contained
    `question`, and the passages the reply cites."""

    contextualised_from: str
    citations: list[dict[str, Any]]


def fresh_turn(schema: type) -> dict[str, Any]:
    """The update that starts a new turn in a thread: every key of `schema` other than the
    input's back to empty (lists with a reducer are overwritten, not appended to)."""
    update: dict[str, Any] = {}
    for key, hint in get_type_hints(schema, include_extras=True).items():
        if key in InputState.__annotations__:
            continue
        annotated = get_origin(hint) is Annotated
        kind = get_args(hint)[0] if annotated else hint
        kind = get_origin(kind) or kind
        empty = {list: [], str: "", int: 0, bool: False}.get(kind)
        update[key] = Overwrite(empty) if annotated else empty
    return update


class ReadState(TurnState, total=False):
    """Retrieve-then-read: the passages fed to the reader and its answer."""

    passages: list[dict[str, Any]]
    answer: str


class IterativeState(ReadState, total=False):
    """Interleaved retrieval and reasoning: one sentence of reasoning per round."""

    thoughts: Annotated[list[str], operator.add]
    rounds: int


def merge_passages(
    old: list[dict[str, Any]] | None, new: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """Union by passage id, first reading first: everything an LLM was given to read.
    Excerpts of one passage (their `sentences`, tools/evidence.py) merge by sentence; a
    whole passage read once covers every excerpt of it."""
    merged = {p["id"]: p for p in old or []}
    for p in new or []:
        if p["id"] not in merged:
            merged[p["id"]] = p
        elif "sentences" in merged[p["id"]]:
            merged[p["id"]] = (
                excerpt(p, [*merged[p["id"]]["sentences"], *p["sentences"]])
                if "sentences" in p
                else p
            )
    return list(merged.values())


class DeftState(TurnState, total=False):
    """The DeFT state machine (docs/method.md section 1). The LLM never tracks state: this does."""

    question_passages: list[dict[str, Any]]  # R_w(Q)
    question_retrieval: list[float]  # Retriever.retrieval_signals of the search for R_w(Q)
    direct: bool
    hop: int  # t, the sub-question step counter
    sub_question: str
    written_by: str  # writer | writer, told why | decomposition (the writer's tries failed)
    plan: list[str]  # ChainRAG's decomposition, made once (first step, or the writer failing)
    plan_step: int  # plan steps before this one were asked already (answered or not)
    rejected: list[dict[str, str]]  # this step's candidate sub-questions the rules refused, why
    rewritten_from: str
    cache_hit: dict[str, Any] | None
    retrieved: list[dict[str, Any]]  # R_w(q_t)
    kept: list[dict[str, Any]]
    evidence: list[dict[str, Any]]  # the kept passages' sentences the step reads
    relevant_found: bool  # some retrieved passage passed tau_rel this step
    expansion: dict[str, Any] | None  # the sentence-graph expansion of this step, if any
    sub_answer: str
    qa_table: Annotated[list[QARow], operator.add]
    unanswerable: Annotated[list[str], operator.add]
    sufficient: bool
    decisions: Annotated[list[Decision], operator.add]
    passages: Annotated[list[dict[str, Any]], merge_passages]
    answer: str
    answer_passage_ids: list[int]
    comparison: dict[str, Any] | None  # a comparison decided by rule from the table
    past_the_bridge: dict[str, Any] | None  # LLM_fin's bridge answer the chain went past
    fallback_question: str  # Q with the table's answers in place: what the fallback reads for
    fallback_reason: str  # why the loop handed over to the fallback
    echoed_answer: str  # the fallback's first answer, which only repeated a name of Q


class ChainStep(TypedDict):
    """One answered (or unanswered) sub-question of the ChainRAG graph."""

    sub_question: str
    rewritten_from: str
    answer: str
    sentence_ids: list[int]
    passage_ids: list[int]


class ChainState(TurnState, total=False):
    """ChainRAG (docs/method.md section 3): a plan of sub-questions answered one by one from the
    sentences the graph expansion gathers, then integrated."""

    plan: list[str]  # sub-questions as decomposed; "#k" stands for answer k
    step: int  # index into the plan of the next sub-question
    sub_question: str
    rewritten_from: str
    gathered: list[dict[str, Any]]  # sentences read for the current sub-question
    chain: Annotated[list[ChainStep], operator.add]
    context: Annotated[list[dict[str, Any]], operator.add]  # every gathered sentence
    decisions: Annotated[list[Decision], operator.add]  # DM relevance of gathered sentences
    passages: Annotated[list[dict[str, Any]], merge_passages]
    answer: str
    answer_passage_ids: list[int]
    comparison: dict[str, Any] | None  # a comparison decided by rule from the chain
