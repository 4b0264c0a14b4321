"""Graph states. Reducers are explicit: `messages`, `thoughts`, `decisions` and `notes`
append, `passages` merge, DeFT's QA table and unanswerable sub-questions join, and the
keys a comparison's parallel steps all hand back take the last (`latest`) or the highest
(`furthest`) value; everything else replaces. A thread keeps its state between runs
(chat turns): `fresh_turn` clears everything but the conversation at the start of each
turn."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict, get_args, get_origin, get_type_hints

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.types import Overwrite

from app.index.corpus import excerpt
from tools.records import CacheHit, Decision, Note, Passage, Rejection, Row


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

    passages: list[Passage]
    answer: str


class IterativeState(ReadState, total=False):
    """Interleaved retrieval and reasoning: one sentence of reasoning per round."""

    thoughts: Annotated[list[str], operator.add]
    rounds: int


def merge_passages(old: list[Passage] | None, new: list[Passage] | None) -> list[Passage]:
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


def join_new(old: list[Any] | None, new: list[Any] | None) -> list[Any]:
    """`old`, then what `new` holds that it does not, in order. A step hands back the
    whole QA table it started from with its own row added; the parallel steps of a
    comparison's fan-out each do so, and their rows join the table in the order the
    turn sent them."""
    joined = list(old or [])
    joined += [item for item in new or [] if item not in joined]
    return joined


def latest(old: Any, new: Any) -> Any:
    """The last value written: what a plain key keeps, for the keys that the parallel
    steps of a fan-out all hand back (the question, the plan; the sub-question of the
    last branch sent)."""
    return new


def furthest(old: int, new: int) -> int:
    """The highest step counter written: the branches of a fan-out are numbered one
    after another (graph/deft.py), so the turn counts every one of them."""
    return max(old, new)


class StepInput(TypedDict, total=False):
    """What one step of the sub-question loop reads of the turn (graph/deft.py: the hop
    subgraph): the question, the QA table and the unanswerable sub-questions so far, the
    step counter, the decomposition, and the last step's sub-question; for a branch of a
    comparison's fan-out, the sub-question the turn wrote for it (`given`)."""

    question: str
    hop: int  # t, the sub-question step counter
    sub_question: str  # the last step's; the step replaces it with its own
    plan: list[str]  # ChainRAG's decomposition, made once (first step, or the writer failing)
    plan_step: int  # plan steps before this one were asked already (answered or not)
    qa_table: list[Row]
    unanswerable: list[str]
    given: str  # asked as it is, without the writer (nodes/options.py)


class StepState(TypedDict, total=False):
    """One step of the sub-question loop (docs/method.md, steps 3.1-3.8). A step starts
    from the turn's `StepInput` alone, so what one step found never reaches the next: the
    keys from `written_by` to `sub_answer` exist only while the step runs. Inside a step
    the table and the lists grow by their reducers, and `decisions` and `passages` start
    empty. The step's output is this whole state, as a subgraph streams only its output
    keys and the trace shows each step's; the turn keeps the keys it shares with it (the
    whole table and lists, which replace its own; this step's decisions and passages,
    which join its own) and drops the rest. The parallel steps of a comparison's fan-out
    hand back theirs at once: the turn's reducers join them."""

    question: str
    hop: int
    sub_question: str
    plan: list[str]
    plan_step: int
    given: str
    written_by: str  # writer | writer, told why | decomposition | the question itself
    rejected: list[Rejection]  # this step's candidate sub-questions the rules refused
    rewritten_from: str
    cache_hit: CacheHit | None
    retrieved: list[Passage]  # R_w(q_t)
    kept: list[Passage]
    evidence: list[Passage]  # the kept passages' sentences the step reads
    relevant_found: bool  # some retrieved passage passed tau_rel this step
    expansion: dict[str, Any] | None  # the sentence-graph expansion of this step, if any
    sub_answer: str
    qa_table: Annotated[list[Row], operator.add]
    unanswerable: Annotated[list[str], operator.add]
    decisions: Annotated[list[Decision], operator.add]
    passages: Annotated[list[Passage], merge_passages]


class DeftState(TurnState, total=False):
    """The DeFT state machine (docs/method.md section 1): what a turn keeps. The LLM never
    tracks state: this does. Each step of the sub-question loop runs in the hop subgraph
    (`StepState`) and hands back the whole table and lists, whose new rows join these;
    a comparison's steps may run in parallel, one per option (`branches`), and hand back
    theirs at once."""

    question: Annotated[str, latest]
    question_passages: list[Passage]  # R_w(Q)
    question_retrieval: list[float]  # Retriever.retrieval_signals of the search for R_w(Q)
    direct: bool
    hop: Annotated[int, furthest]  # t, the sub-question step counter
    # the last step's sub-question ("" when none could be asked)
    sub_question: Annotated[str, latest]
    plan: Annotated[list[str], latest]
    plan_step: Annotated[int, latest]
    branches: list[str]  # the sub-questions the next steps ask at once, one per option
    qa_table: Annotated[list[Row], join_new]
    unanswerable: Annotated[list[str], join_new]
    sufficient: bool
    decisions: Annotated[list[Decision], operator.add]
    passages: Annotated[list[Passage], merge_passages]
    answer: str
    answer_passage_ids: list[int]
    comparison: dict[str, Any] | None  # a comparison decided by rule from the table
    notes: Annotated[list[Note], operator.add]  # what the answering rules did (the trace)


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
    passages: Annotated[list[Passage], merge_passages]
    answer: str
    answer_passage_ids: list[int]
    comparison: dict[str, Any] | None  # a comparison decided by rule from the chain
