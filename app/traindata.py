"""Gold decompositions of *training* questions, as chains of self-contained sub-questions.

Where they come from (recorded per chain in `source`):
- MuSiQue `train` questions and `extra_train/musique_train_hipporag100.json`: the gold
  `question_decomposition`; `#k` references are replaced by step k's gold answer and
  `X >> relation` steps are phrased with `prompts/relation_questions.json`.
- 2WikiMultihopQA `train`: the gold `evidences` triples, phrased the same way.

Only `train` and `extra_train` are read: dev questions are for tuning, held-out ones for
checking. `python -m app.traindata` writes the bank of worked examples that the
sub-question writer draws its few-shot examples from (`app/data/sub_question_examples.json`).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from app.checks import check_benchmarks
from app.errors import UserError, exit_with
from app.settings import Settings

EXAMPLES_FILE = Path(__file__).parent / "data" / "sub_question_examples.json"
_BACKREF = re.compile(r"#(\d+)")
_DISAMBIGUATION = re.compile(r"\s*\([^)]*\)\s*$")


@dataclass(frozen=True)
class GoldChain:
    """A training question with its gold sub-questions and answers, in order."""

    question: str
    steps: tuple[tuple[str, str], ...]
    source: str
    # The same sub-questions before resolution: "#k" stands for step k's answer (the form
    # a whole-question decomposition is written in, before ChainRAG's rewriting).
    templated: tuple[str, ...] = ()


@cache
def relation_questions() -> dict[str, str]:
    from prompts import PROMPT_DIR  # here, so the DM trainer runs without langchain

    data = json.loads((PROMPT_DIR / "relation_questions.json").read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if not k.startswith("_")}


def named_subject(subject: str) -> str:
    """A subject as questions name it: "Waking the Dead (film)" -> "Waking the Dead"."""
    return _DISAMBIGUATION.sub("", subject.strip()) or subject.strip()


def phrase_relation(subject: str, relation: str) -> str:
    """`(Waking the Dead (film), director)` -> "Who directed Waking the Dead?"."""
    template = relation_questions().get(relation.strip(), "What is the {r} of {s}?")
    return template.format(s=named_subject(subject), r=relation.strip())


def _tidy(question: str) -> str:
    question = re.sub(r"\s+([?,.])", r"\1", " ".join(question.split()))
    question = question[:1].upper() + question[1:]
    return question if question.endswith("?") else f"{question}?"


def resolve_references(text: str, answers: Sequence[str]) -> str:
    """`#k` replaced by the k-th earlier gold answer; a reference past them stays."""

    def resolve(match: re.Match[str]) -> str:
        k = int(match.group(1))
        return answers[k - 1] if 0 < k <= len(answers) else match.group(0)

    return _BACKREF.sub(resolve, text)


def musique_chain(item: dict[str, Any], source: str) -> GoldChain | None:
    """Resolve `#k` with earlier gold answers so every step names its entity."""
    answers: list[str] = []
    steps, templated = [], []
    for step in item.get("question_decomposition") or []:
        raw = step["question"]
        text = resolve_references(raw, answers)
        if _BACKREF.search(text):
            return None  # a reference to a later step: not a chain we can show
        if ">>" in raw:
            text = phrase_relation(*text.split(">>", 1))
            raw = phrase_relation(*raw.split(">>", 1))
        answers.append(step["answer"])
        steps.append((_tidy(text), step["answer"]))
        templated.append(_tidy(re.sub(r"#\s*(\d+)", r"#\1", raw)))
    if len(steps) < 2:
        return None
    return GoldChain(item["question"], tuple(steps), source, tuple(templated))


def wiki2_chain(item: dict[str, Any], source: str) -> GoldChain | None:
    triples = item.get("evidences") or []
    steps = tuple((phrase_relation(s, r), o) for s, r, o in triples)
    objects: dict[str, int] = {}
    templated = []
    for k, (subject, relation, obj) in enumerate(triples, 1):
        ref = objects.get(subject.lower())
        templated.append(phrase_relation(f"#{ref}" if ref else subject, relation))
        objects.setdefault(obj.lower(), k)
    if len(steps) < 2:
        return None
    return GoldChain(item["question"], steps, source, tuple(templated))


def gold_chains(data_dir: Path) -> list[GoldChain]:
    """Every training question with a usable gold decomposition, deduplicated."""
    chains: list[GoldChain | None] = []
    musique = json.loads((data_dir / "musique" / "questions.json").read_text())
    chains += [musique_chain(q, "musique/train") for q in musique if q.get("split") == "train"]
    extra = data_dir / "extra_train" / "musique_train_hipporag100.json"
    if extra.is_file():
        chains += [musique_chain(q, "extra_train/musique") for q in json.loads(extra.read_text())]
    wiki2 = json.loads((data_dir / "2wikimultihopqa" / "questions.json").read_text())
    chains += [wiki2_chain(q, "2wikimultihopqa/train") for q in wiki2 if q.get("split") == "train"]
    unique: dict[str, GoldChain] = {}
    for chain in chains:
        if chain is not None:
            unique.setdefault(chain.question, chain)
    return list(unique.values())


def write_examples(data_dir: Path, out: Path = EXAMPLES_FILE) -> list[GoldChain]:
    chains = gold_chains(data_dir)
    out.write_text(
        json.dumps([asdict(c) for c in chains], indent=1, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    return chains


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Settings().data)
    parser.add_argument("--out", type=Path, default=EXAMPLES_FILE)
    args = parser.parse_args()
    try:
        check_benchmarks(args.data, ("musique", "2wikimultihopqa"))
    except UserError as exc:
        exit_with(exc)
    chains = write_examples(args.data, args.out)
    by_source: dict[str, int] = {}
    for chain in chains:
        by_source[chain.source] = by_source.get(chain.source, 0) + 1
    print(f"{len(chains)} gold chains -> {args.out}: {by_source}")


if __name__ == "__main__":
    main()
