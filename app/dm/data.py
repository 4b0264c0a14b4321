"""Labelled examples for the trained decision model, from gold annotations only.

Every example records how its label was made (`how`), so that a reader of the data can
check it. Sources: the `train` split of the three benchmarks plus `extra_train/` (for the
training and calibration sets), and the `dev` split (for evaluation only).

kind    text_a / text_b                          label (how)
rel     (sub-)question / "title: passage"        1 for its gold passage (gold-passage,
                                                 gold-step), 0 for retrieved non-gold
                                                 passages (retrieved-negative) and for the
                                                 other steps' gold passages (other-step);
                                                 extra["query"] says which query it was
suff    question / QA table (a prefix of the     1 only for the whole chain (gold-chain),
        gold chain)                              0 for a strict prefix (chain-prefix);
                                                 with --suff-near-misses also 0 for a
                                                 prefix whose last step asks another
                                                 relation of the right subject, answered
                                                 as that relation is elsewhere
                                                 (wrong-step), and for a strict prefix
                                                 with its last step asked again in other
                                                 words (repeated-step)
same    sub-question / sub-question              1 for two phrasings of one relation step
                                                 (template-paraphrase; llm-rewording and
                                                 llm-rewording-pair from the chat model's
                                                 rewordings in dm_rewordings.json), 0 for
                                                 the same subject with another relation or
                                                 the same relation of another subject
                                                 (near-miss-*, near-miss-*-llm)
depth   question / ""                            1 when gold needs at most 2 hops (gold-hops);
                                                 extra_train's questions (its HotpotQA
                                                 ones give depth rows only) go to train
                                                 alone, for the depth model
direct  question / its top-w passage ids         1 when all gold passages are among them
                                                 (gold-in-top-w); scored from `rel`
                                                 and the retrieval's signals (stored)

Questions are split into train and calibration sets by a hash of their id, so a question
never feeds both.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from app.dm.features import RETRIEVAL_SIGNALS
from app.errors import UserError
from app.index.corpus import passage_text as corpus_passage_text
from app.settings import BENCHMARKS
from app.traindata import (
    musique_chain,
    named_subject,
    phrase_relation,
    resolve_references,
    wiki2_chain,
)

REWORDINGS_FILE = Path(__file__).resolve().parents[1] / "data" / "dm_rewordings.json"
SPLITS = ("train", "dev")  # the benchmark splits examples are built from
EXTRA_HOTPOTQA_SOURCE = "extra_train/hotpotqa"
CALIBRATION_SHARE = 0.15  # of training questions, held apart to fit the temperatures
NEGATIVES_PER_QUERY = 3
SAME_NEAR_MISSES = 2
_TEMPLATE_FREE = re.compile(r"\s+")


@dataclass
class DMExample:
    kind: str
    text_a: str
    text_b: str
    label: int
    how: str
    source: str
    question_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Item:
    """One benchmark question, normalised for example building."""

    id: str
    benchmark: str
    question: str
    gold_ids: list[int]
    hops: int
    steps: list[tuple[str, str, int | None]]  # sub-question, answer, gold passage id
    triples: list[tuple[str, str, str]]
    # Per step, (subject, relation) where the gold step is a relation ("X >> performer",
    # an evidence triple), else None: what wrong and repeated steps are made from.
    relations: list[tuple[str, str] | None] = field(default_factory=list)


def _hops(benchmark: str, q: dict[str, Any]) -> int:
    if "hops" in q:
        return int(q["hops"])
    if q.get("type") == "bridge_comparison":
        return 4
    return 2


def _steps(benchmark: str, q: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    if benchmark == "musique" and q.get("question_decomposition"):
        chain = musique_chain(q, benchmark)
        if chain is None:
            return []
        context = q.get("context_corpus_idx") or []
        ids = [
            context[s["paragraph_support_idx"]]
            if s.get("paragraph_support_idx") is not None and context
            else None
            for s in q["question_decomposition"]
        ]
        return [(sq, a, pid) for (sq, a), pid in zip(chain.steps, ids, strict=True)]
    if benchmark == "2wikimultihopqa" and q.get("evidences"):
        chain = wiki2_chain(q, benchmark)
        if chain is None:
            return []
        by_title = {
            t.lower(): i for t, i in zip(q["gold_titles"], q["gold_corpus_idx"], strict=True)
        }
        return [
            (sq, a, by_title.get(s.lower()))
            for (sq, a), (s, _, _) in zip(chain.steps, q["evidences"], strict=True)
        ]
    return []


def _relations(q: dict[str, Any]) -> list[tuple[str, str] | None]:
    """(subject, relation) of each gold step that is a relation, "#k" resolved."""
    if q.get("evidences"):
        return [(subject, relation) for subject, relation, _ in q["evidences"]]
    answers: list[str] = []
    relations: list[tuple[str, str] | None] = []
    for step in q.get("question_decomposition") or []:
        subject, arrow, relation = resolve_references(step["question"], answers).partition(">>")
        relations.append((subject.strip(), relation.strip()) if arrow and subject.strip() else None)
        answers.append(step["answer"])
    return relations


def load_items(data_dir: Path, benchmark: str, split: str) -> list[Item]:
    items = json.loads((data_dir / benchmark / "questions.json").read_text())
    return [
        Item(
            id=q["id"],
            benchmark=benchmark,
            question=q["question"],
            gold_ids=list(q["gold_corpus_idx"]),
            hops=_hops(benchmark, q),
            steps=_steps(benchmark, q),
            triples=[tuple(t) for t in q.get("evidences") or []],
            relations=_relations(q),
        )
        for q in items
        if q.get("split") == split
    ]


def _stable_int(text: str) -> int:
    """A hash that is the same in every process (Python's `hash` of a str is not)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def is_calibration(question_id: str) -> bool:
    return _stable_int(question_id) % 1000 < CALIBRATION_SHARE * 1000


def passage_text(record: Any) -> str:
    return corpus_passage_text(record.title, record.text)


# The query a relevance example was made for: the whole question, whose later hops'
# passages nothing in it points at, or one gold step (the graph's per-step filter).
REL_QUERY = {"gold-passage": "question", "gold-step": "sub-question"}


def rel_queries(item: Item, gold: set[int]) -> list[tuple[str, set[int], str]]:
    """(query, its gold passage ids, how the positives are labelled) for one question."""
    queries = [(item.question, gold, "gold-passage")]
    return queries + [(sq, {pid}, "gold-step") for sq, _, pid in item.steps if pid is not None]


def rel_examples(item: Item, retriever: Any, index: Any, w: int) -> Iterator[DMExample]:
    """Question-level and step-level relevance pairs, with retrieved hard negatives."""
    gold = set(item.gold_ids)
    texts = {r.id: passage_text(r) for r in index.passages(item.gold_ids)}
    for query, positives, how in rel_queries(item, gold):
        tag = {"query": REL_QUERY[how]}
        for pid in positives:
            yield DMExample("rel", query, texts[pid], 1, how, item.benchmark, item.id, tag)
        if how == "gold-step":  # the chain's other passages: related, but not for this step
            for pid in sorted(gold - positives)[:1]:
                yield DMExample(
                    "rel", query, texts[pid], 0, "other-step", item.benchmark, item.id, tag
                )
        negatives = [p for p in retriever.retrieve(query, w) if p.id not in gold]
        for p in negatives[:NEGATIVES_PER_QUERY]:
            yield DMExample(
                "rel", query, passage_text(p), 0, "retrieved-negative", item.benchmark, item.id, tag
            )


def format_table(steps: list[tuple[str, str, Any]]) -> str:
    """The QA table as the suff decision sees it (same shape as `prompts.format_qa_table`)."""
    return "\n".join(f"- {q} {a}" for q, a, _ in steps)


def suff_examples(item: Item) -> Iterator[DMExample]:
    n = len(item.steps)
    for k in range(1, n + 1):
        label, how = (1, "gold-chain") if k == n else (0, "chain-prefix")
        yield DMExample(
            "suff", item.question, format_table(item.steps[:k]), label, how, item.benchmark, item.id
        )


def suff_near_misses(item: Item, answers: dict[str, list[str]]) -> Iterator[DMExample]:
    """Negatives shaped like the graph's own tables (`answers`: relation -> answers seen
    for it): a prefix whose last step asks another relation of the right subject ("When
    was X born?" where the question needs where), and a prefix whose last step is asked
    again in other words. Trained on prefixes alone, the DM counts rows; trained with
    these it ranks them better but ended fewer loops in the graph, for more LLM calls and
    no better answers (`bench.suff_models`; `hoprag dm data --suff-near-misses`)."""
    n = len(item.steps)
    for k, relation in enumerate(item.relations[:n]):
        if relation is None:
            continue
        subject, gold_relation = relation
        wrong = near_miss(gold_relation, answers, f"{item.id}/{k}", item.steps[k][1])
        if wrong:
            table = [*item.steps[:k], (phrase_relation(subject, wrong[0]), wrong[1], None)]
            yield DMExample(
                "suff", item.question, format_table(table), 0, "wrong-step", item.benchmark, item.id
            )
        if k < n - 1:
            again = (paraphrase(subject, gold_relation), item.steps[k][1], None)
            yield DMExample(
                "suff",
                item.question,
                format_table([*item.steps[: k + 1], again]),
                0,
                "repeated-step",
                item.benchmark,
                item.id,
            )


def relation_answers(items: list[Item]) -> dict[str, list[str]]:
    """Relation -> the gold answers its steps have (in item order, without repeats)."""
    answers: dict[str, list[str]] = {}
    for item in items:
        for relation, (_, answer, _) in zip(item.relations, item.steps, strict=False):
            if relation and answer not in answers.setdefault(relation[1], []):
                answers[relation[1]].append(answer)
    return answers


def near_miss(
    relation: str, answers: dict[str, list[str]], key: str, gold_answer: str
) -> tuple[str, str] | None:
    """Another relation, as close in words as there is ("date of birth" for "place of
    birth"), with an answer it has elsewhere that is not the gold one; chosen by a
    stable hash of `key`."""
    words = set(relation.lower().split()) - {"of", "the", "a"}
    others = sorted(r for r in answers if r != relation)
    if not others:
        return None
    best = max(len(words & set(r.lower().split())) for r in others)
    closest = [r for r in others if len(words & set(r.lower().split())) == best]
    other = closest[_stable_int(key) % len(closest)]
    choices = [a for a in answers[other] if a.lower() != gold_answer.lower()]
    return (other, choices[_stable_int(key + other) % len(choices)]) if choices else None


def paraphrase(subject: str, relation: str) -> str:
    """The relation step in its plain form, or in another when the template is plain."""
    specific = phrase_relation(subject, relation)
    plain = f"What is the {relation} of {subject}?"
    if _TEMPLATE_FREE.sub(" ", specific.lower()) == plain.lower():
        return f"What is {subject}'s {relation}?"
    return plain


def relation_subjects(items: list[Item]) -> dict[str, list[str]]:
    """Relation -> the distinct subjects the items' evidence triples ask it of, sorted."""
    subjects: dict[str, set[str]] = {}
    for item in items:
        for subject, relation, _ in item.triples:
            subjects.setdefault(relation, set()).add(subject)
    return {relation: sorted(s) for relation, s in sorted(subjects.items())}


def load_rewordings(path: Path = REWORDINGS_FILE) -> dict[str, dict[str, list[str]]]:
    """Split -> relation -> the chat model's other wordings of its question (templates
    over `{s}`, written by `hoprag dm rewordings`); none when the file is missing."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {split: data.get(split) or {} for split in SPLITS}


def depth_example(item: Item) -> DMExample:
    return DMExample(
        "depth", item.question, "", int(item.hops <= 2), "gold-hops", item.benchmark, item.id
    )


def same_examples(
    item: Item,
    relations: list[str],
    rewordings: dict[str, list[str]] | None = None,
    peers: dict[str, list[str]] | None = None,
) -> Iterator[DMExample]:
    """Paraphrase pairs from relation steps: the phrasing template against the plain
    "What is the R of S?" form; near misses change the relation or the subject, each
    in both forms. Every positive's second question is a plain form, so near misses
    only in template form taught the DM that a plain form means "same": it said so,
    with p >= 0.8, to 93% of the plain near misses of dev (`bench.same_calibration`).

    Templates say each relation one way only, so a DM trained on them alone called
    "Who was the founder of X?" another question than "Who founded X?". `rewordings`
    (relation -> the chat model's other wordings of its question, `hoprag dm
    rewordings`) add, where they exist, a rewording against the template and against
    another rewording (yes), and reworded near misses of the relation and the subject.

    The subject near misses above swap in another entity of the question, seldom of the
    same type ("Who directed Sean McNamara?"); `peers` (relation -> the subjects other
    questions ask it of) add one that swaps in an entity the relation fits ("Who
    directed Avatar?" against "Who directed Titanic?")."""

    def pair(first: str, second: str, label: int, how: str) -> DMExample:
        return same_pair(item, first, second, label, how)

    rewordings = rewordings or {}
    subjects = [s for s, _, _ in item.triples]
    for i, (subject, relation, _) in enumerate(item.triples):
        specific = phrase_relation(subject, relation)
        yield pair(specific, paraphrase(subject, relation), 1, "template-paraphrase")
        others = [r for r in relations if r != relation]
        for j in range(SAME_NEAR_MISSES):
            other = others[(_stable_int(item.id) + i + j) % len(others)]
            yield pair(specific, phrase_relation(subject, other), 0, "near-miss-relation")
            yield pair(specific, paraphrase(subject, other), 0, "near-miss-relation-plain")
        other_subjects = [s for s in subjects if s.lower() != subject.lower()]
        if other_subjects:
            yield pair(
                specific, phrase_relation(other_subjects[0], relation), 0, "near-miss-subject"
            )
            yield pair(
                specific, paraphrase(other_subjects[0], relation), 0, "near-miss-subject-plain"
            )
        named = named_subject(subject).lower()
        fits = [p for p in (peers or {}).get(relation, []) if named_subject(p).lower() != named]
        if fits:
            peer = fits[_stable_int(f"{item.id}/{i}/peer") % len(fits)]
            yield pair(specific, phrase_relation(peer, relation), 0, "near-miss-peer")
            other_subjects = [peer, *other_subjects]  # the reworded subject swap too
        yield from reworded_pairs(item, i, rewordings, others, other_subjects)


def same_pair(item: Item, first: str, second: str, label: int, how: str) -> DMExample:
    return DMExample("same", first, second, label, how, item.benchmark, item.id)


def reworded_pairs(
    item: Item,
    step: int,
    rewordings: dict[str, list[str]],
    others: list[str],
    other_subjects: list[str],
) -> Iterator[DMExample]:
    """`same_examples`' pairs from the chat model's rewordings of step `step`'s relation
    (templates over `{s}`), each chosen by a stable hash of the question and step."""
    subject, relation, _ = item.triples[step]
    own = rewordings.get(relation) or []
    if not own:
        return
    k = _stable_int(f"{item.id}/{step}")
    named = named_subject(subject)

    def reworded(templates: list[str], offset: int = 0, who: str = named) -> str:
        return templates[(k + offset) % len(templates)].format(s=who)

    mine = reworded(own)
    yield same_pair(item, phrase_relation(subject, relation), mine, 1, "llm-rewording")
    if len(own) > 1:
        yield same_pair(item, mine, reworded(own, 1), 1, "llm-rewording-pair")
    reworded_others = [r for r in others if rewordings.get(r)]
    if reworded_others:
        other = reworded_others[k % len(reworded_others)]
        yield same_pair(item, mine, reworded(rewordings[other]), 0, "near-miss-relation-llm")
    if other_subjects:
        swapped = reworded(own, 1, named_subject(other_subjects[0]))
        yield same_pair(item, mine, swapped, 0, "near-miss-subject-llm")


def direct_example(item: Item, retriever: Any, w: int) -> DMExample:
    """The question's top w with how surely retrieval found them (`retrieval_signals`),
    which the direct model reads beside the passages: one search, as the graph makes."""
    passages, signals = retriever.retrieve_with_signals(item.question, w)
    top = [p.id for p in passages]
    label = int(set(item.gold_ids) <= set(top))
    return DMExample(
        "direct",
        item.question,
        "",
        label,
        "gold-in-top-w",
        item.benchmark,
        item.id,
        extra={"passage_ids": top, "retrieval": signals},
    )


def count(examples: list[DMExample]) -> dict[str, dict[str, int]]:
    """Counts per kind and label, for the report."""
    table: dict[str, Counter[str]] = {}
    for e in examples:
        table.setdefault(e.kind, Counter())[f"label={e.label}"] += 1
    return {k: dict(sorted(v.items())) for k, v in sorted(table.items())}


def write_jsonl(path: Path, examples: list[DMExample]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for e in examples:
            out.write(json.dumps(asdict(e), ensure_ascii=False) + "\n")


def read_jsonl(path: Path) -> list[DMExample]:
    with path.open(encoding="utf-8") as lines:
        return [DMExample(**json.loads(line)) for line in lines if line.strip()]


def extra_musique_items(data_dir: Path) -> Iterator[tuple[Item, dict[int, str], set[int]]]:
    """`extra_train/musique_train_hipporag100.json`: questions with their own 20 paragraphs
    (supporting ones marked), so negatives come from those paragraphs, not an index."""
    path = data_dir / "extra_train" / "musique_train_hipporag100.json"
    if not path.is_file():
        return
    for q in json.loads(path.read_text()):
        texts = {i: f"{p['title']}: {p['paragraph_text']}" for i, p in enumerate(q["paragraphs"])}
        gold = {i for i, p in enumerate(q["paragraphs"]) if p.get("is_supporting")}
        chain = musique_chain(q, "extra_train/musique")
        steps = (
            [
                (sq, a, s.get("paragraph_support_idx"))
                for (sq, a), s in zip(chain.steps, q["question_decomposition"], strict=True)
            ]
            if chain
            else []
        )
        item = Item(
            str(q["id"]),
            "extra_train/musique",
            q["question"],
            sorted(gold),
            len(q["question_decomposition"]),
            steps,
            [],
            _relations(q) if chain else [],
        )
        yield item, texts, gold


def extra_rel_examples(item: Item, texts: dict[int, str], gold: set[int]) -> Iterator[DMExample]:
    for query, positives, how in rel_queries(item, gold):
        tag = {"query": REL_QUERY[how]}
        for pid in sorted(positives):
            yield DMExample("rel", query, texts[pid], 1, how, item.benchmark, item.id, tag)
        negatives = [i for i in sorted(texts) if i not in gold]
        for i in negatives[:NEGATIVES_PER_QUERY]:
            yield DMExample(
                "rel", query, texts[i], 0, "listed-distractor", item.benchmark, item.id, tag
            )


EXTRA_HOTPOTQA = (
    "hotpotqa_train_hipporag100.json",
    "hotpotqa_train_ecm500_gold_evidence_only.json",
)


def extra_hotpotqa_depth_examples(data_dir: Path) -> Iterator[DMExample]:
    """`extra_train/`'s 600 HotpotQA training questions: each needs its two supporting
    paragraphs, so each is a 2-hop `depth` example. HotpotQA phrases two hops in one long
    sentence, which a depth estimate trained on its 150 `train` questions alone calls
    deep (docs/BENCHMARKS.md, "Decision model: the depth model")."""
    seen: set[str] = set()
    for name in EXTRA_HOTPOTQA:
        path = data_dir / "extra_train" / name
        if not path.is_file():
            continue
        for q in json.loads(path.read_text()):
            if q["question"] in seen:
                continue
            seen.add(q["question"])
            qid = str(q.get("_id") or hashlib.sha256(q["question"].encode()).hexdigest()[:24])
            yield DMExample("depth", q["question"], "", 1, "gold-hops", EXTRA_HOTPOTQA_SOURCE, qid)


def build(
    data_dir: Path, settings: Any, out_dir: Path, suff_near_misses_too: bool = False
) -> dict[str, Any]:
    """Write train/calib/dev JSONL files of examples; returns the counts per file and kind.
    `suff_near_misses_too` adds `suff_near_misses` (to every split: off for the shipped DM).

    Needs the three benchmark indexes (named after their benchmarks) for hard negatives
    and for the `direct` labels, which depend on what retrieval returns."""

    def suff_rows(item: Item, answers: dict[str, list[str]]) -> list[DMExample]:
        near = suff_near_misses(item, answers) if suff_near_misses_too else ()
        return [*suff_examples(item), *near]

    # chromadb, langchain and the embedder: only to build, so the trainer and bench
    # scripts read examples without them
    from app.encoders.embeddings import Embedder
    from app.index.store import CorpusIndex
    from tools.retriever import Retriever

    embedder = Embedder(settings.runtime_dir)
    rewordings = load_rewordings()
    sets: dict[str, list[DMExample]] = {"train": [], "calib": [], "dev": []}
    for split in SPLITS:
        for benchmark in BENCHMARKS:
            index = CorpusIndex.open(settings, benchmark)
            retriever = Retriever(index, embedder)
            items = load_items(data_dir, benchmark, split)
            peers = relation_subjects(items)
            relations = sorted(peers)
            answers = relation_answers(items) if suff_near_misses_too else {}
            for item in tqdm(items, desc=f"{benchmark}/{split}", unit="q"):
                examples = [
                    *rel_examples(item, retriever, index, settings.w),
                    *suff_rows(item, answers),
                    depth_example(item),
                    *(
                        same_examples(item, relations, rewordings.get(split), peers)
                        if relations
                        else []
                    ),
                    direct_example(item, retriever, settings.w),
                ]
                target = (
                    "dev" if split == "dev" else ("calib" if is_calibration(item.id) else "train")
                )
                sets[target] += examples
            index.close()
    extra = list(extra_musique_items(data_dir))
    answers = relation_answers([item for item, _, _ in extra]) if suff_near_misses_too else {}
    for item, texts, gold in extra:
        target = "calib" if is_calibration(item.id) else "train"
        sets[target] += [*extra_rel_examples(item, texts, gold), *suff_rows(item, answers)]
    # Extra depth rows train the depth model only: the depth adapter's temperature is
    # fitted on the benchmarks' own calibration questions, as before them.
    sets["train"] += [depth_example(item) for item, _, _ in extra]
    sets["train"] += extra_hotpotqa_depth_examples(data_dir)
    for name, examples in sets.items():
        write_jsonl(out_dir / f"{name}.jsonl", examples)
    counts = {name: count(examples) for name, examples in sets.items()}
    (out_dir / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    return counts


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
