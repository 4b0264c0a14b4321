"""Date comparisons from the QA table, by rule: "Which film has the director born first,
A or B?" once the table holds both directors' birth dates.

The embedded 1.5B model finds these facts but cannot compare them: handed "Tom Clegg was
born in 1934" and "Alberto Lattuada was born on 15 October 1914" it answers that Clegg
is older, with or without a worked reasoning line. Comparing two dates is arithmetic,
so it belongs to code, the way an agent hands arithmetic to a tool. The rule answers
only when everything is unambiguous (two options, a direction word, one date per option
reached through the table's rows, dates that differ at the precision both give);
otherwise it returns None and the LLM answers as before. For the same reason the
sufficiency of a QA table for a date comparison is the rule's to judge: it holds both
dates or it does not (`is_date_comparison`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from app.settings import COMPARISON_CHAIN_HOPS, COMPARISON_MAX_DATE_WORDS
from tools.answer_rules import normalize_answer, says

RULE = "rule"  # the backend name a decision made by this rule is traced with
# "..., A or B?" and "... out of A and B?"
_OPTIONS = (
    re.compile(r",\s*(?P<a>.+?)\s+or\s+(?P<b>.+?)\s*\??\s*$", re.IGNORECASE),
    re.compile(r"\bout of\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)\s*\??\s*$", re.IGNORECASE),
)
_EARLIER = {"first", "earlier", "earliest", "older", "oldest", "elder", "before", "sooner"}
_LATER = {"later", "latest", "last", "younger", "youngest", "recent", "recently", "newer"}
# The event a question compares, told by its words; a row's date counts for an option
# only when its sub-question is about the same event (or the question names none).
_EVENTS = {
    "birth": {"born", "birth", "older", "oldest", "younger", "youngest", "elder", "age"},
    "death": {"died", "die", "death", "dead"},
}
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_YEAR = re.compile(r"\b(1\d{3}|20\d{2})\b")
_ISO = re.compile(r"\b(1\d{3}|20\d{2})-(\d{1,2})-(\d{1,2})\b")
_DAY = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\b")
_PARENTHESIS = re.compile(r"\s*\([^)]*\)")
_DATE_WORD = re.compile(r"^(\d{1,4}(?:st|nd|rd|th)?|c|ca)$")  # a word a bare date may hold
_YES_NO_OPENERS = {"are", "is", "do", "does", "did", "were", "was", "have", "has"}
_OPTION_TAIL = re.compile(r",\s+[a-z].*$")  # ", held more diverse roles ..." after a name
# Lower-case words inside a name ("Pirates of the Caribbean", "Lucrezia de' Medici").
_NAME_JOINERS = {"of", "the", "de", "del", "della", "di", "da", "du", "la", "le", "van"}
_NAME_JOINERS |= {"von", "der", "den", "y", "e", "a", "an", "in", "on", "at", "by", "for", "to"}


@dataclass(frozen=True)
class Date:
    """A calendar date as precise as the text gives it (0: month or day not given)."""

    year: int
    month: int = 0
    day: int = 0

    def order(self, other: Date) -> int | None:
        """-1 when self is earlier, 1 when later, None when the shared precision ties."""
        pairs = [(self.year, other.year)]
        if self.month and other.month:
            pairs.append((self.month, other.month))
            if self.day and other.day:
                pairs.append((self.day, other.day))
        for mine, theirs in pairs:
            if mine != theirs:
                return -1 if mine < theirs else 1
        return None

    def __str__(self) -> str:
        return "-".join(str(part) for part in (self.year, self.month, self.day) if part)


def parse_date(text: str) -> Date | None:
    """The date a short answer states ("15 October 1914", "October 15, 1914", "1934",
    "1914-10-15"); None for anything longer than a date or holding no single year."""
    words = text.replace(",", " ").split()
    if not words or len(words) > COMPARISON_MAX_DATE_WORDS:
        return None
    iso = _ISO.search(text)
    if iso:
        return Date(*(int(part) for part in iso.groups()))
    years = _YEAR.findall(text)
    if len(set(years)) != 1:
        return None
    month = next(
        (_MONTHS[w.lower().strip(".")] for w in words if w.lower().strip(".") in _MONTHS), 0
    )
    rest = _YEAR.sub(" ", text)
    days = [int(d) for d in _DAY.findall(rest) if 1 <= int(d) <= 31]
    return Date(int(years[0]), month, days[0] if month and len(days) == 1 else 0)


def is_date(text: str) -> bool:
    """The text is a date and nothing else ("1892", "8 April 1977"): no title holding a
    year ("2001: A Space Odyssey")."""
    words = [w.lower().strip(".,()") for w in text.split()]
    return parse_date(text) is not None and all(
        w in _MONTHS or _DATE_WORD.match(w) for w in words if w
    )


def comparison_options(question: str) -> tuple[str, tuple[str, str]] | None:
    """What a "which one" question asks (the part before the options) and the two things
    it compares, as it writes them."""
    for pattern in _OPTIONS:
        match = pattern.search(question)
        if match:
            a, b = match.group("a").strip(" ,"), match.group("b").strip(" ,?")
            if a and b and normalize_answer(a) != normalize_answer(b):
                return question[: match.start()], (a, b)
    return None


def _is_name_word(word: str) -> bool:
    """A word of a name as questions write them: capitalised, a number, or a qualifier in
    parentheses ("Slava (River)", "Mutiny (1952 Film)", "Ţerova")."""
    return bool(word) and (word[0].isupper() or word[0].isdigit() or word[0] == "(")


def _name_before(words: list[str]) -> str:
    """The name that `words` end with: name words, and the lower-case words that join
    them ("Pirates of the Caribbean"), back to the first other word ("both films: A",
    "the movies A")."""
    taken: list[str] = []
    for word in reversed(words):
        if not (_is_name_word(word) or word in _NAME_JOINERS):
            break
        taken.insert(0, word)
    while taken and not _is_name_word(taken[0]):  # "the Laleli Mosque": no leading joiner
        taken.pop(0)
    return " ".join(taken)


def _name_after(words: list[str]) -> str:
    """The name `words` start with, after any lower-case words that describe it
    ("director of film A"): name words, and the joiners between them, up to a comma."""
    rest = list(words)
    while rest and not _is_name_word(rest[0]):
        rest.pop(0)
    taken: list[str] = []
    for word in rest:
        if not (_is_name_word(word) or word in _NAME_JOINERS):
            break
        taken.append(word.rstrip(",?"))
        if word[-1] in ",?":
            break
    while taken and not _is_name_word(taken[-1]):  # "A of the same ...": no joiner at the end
        taken.pop()
    return " ".join(taken)


def compared_options(question: str) -> tuple[str, ...]:
    """The named things a comparison question compares, as it writes them; () for any
    other question. "Which film came out first, A or B?" and "Who was born first out of
    A and B?" (`comparison_options`), and yes/no questions that set two names side by
    side: "Was A or B born first?", "Are (both) A and B of the same nationality?", "Do
    director of film A and director of film B share ...?", "Are A and B both ...?"."""
    parsed = comparison_options(question)
    if parsed is not None:  # "Which person, A or B, held ...?": B ends at its comma
        return tuple(_OPTION_TAIL.sub("", option) for option in parsed[1])
    words = question.strip().split()
    if not words or words[0].lower() not in _YES_NO_OPENERS:
        return ()
    body = words[1:]
    normalised = set(normalize_answer(question).split())
    for position, word in enumerate(body):
        side_by_side = word == "or" or (word == "and" and bool(normalised & {"same", "both"}))
        if side_by_side:
            first = _name_before(body[:position])
        elif word == "as" and "same" in normalised:  # "Does A have the same ... as B?"
            first = _name_after(body[:position])
        else:
            continue
        second = _name_after(body[position + 1 :])
        if first and second and normalize_answer(first) != normalize_answer(second):
            return first, second
    return ()


def direction(question: str) -> int | None:
    """-1 when the earlier date wins ("born first", "older"), 1 when the later one does."""
    words = set(normalize_answer(question).split())
    earlier, later = bool(words & _EARLIER), bool(words & _LATER)
    if earlier == later:
        return None
    return -1 if earlier else 1


def event(text: str) -> str:
    """Which event a question or sub-question is about: birth, death, or '' (any)."""
    words = set(normalize_answer(text).split())
    found = [name for name, cues in _EVENTS.items() if words & cues]
    return found[0] if len(found) == 1 else ""


def _mentions(question: str, name: str) -> bool:
    """The sub-question names the thing, parenthetical qualifiers like "(Film)" aside."""
    return any(says(question, variant) for variant in {name, _PARENTHESIS.sub("", name)})


def _about(row: dict[str, Any], wanted_event: str) -> bool:
    """The row asks about the wanted event itself ("Where was X born?" for a birth date):
    its answer is no further link in the chain, and its subject is the one to date."""
    return bool(wanted_event) and event(row["sub_question"]) == wanted_event


@dataclass(frozen=True)
class DateComparison:
    """A "which one, A or B?" question the rule can compare in: its two options, which
    date wins (-1: the earlier, 1: the later) and the event compared ('' for any)."""

    options: tuple[str, str]
    sign: int
    event: str

    def naming_both(self, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows about the comparison itself ("Which film has the director who died later,
        A or B?" -> A): followed, they would lend A's date to B."""
        return [r for r in rows if all(_mentions(r["sub_question"], o) for o in self.options)]


def parse_comparison(question: str) -> DateComparison | None:
    parsed = comparison_options(question)
    if parsed is None:
        return None
    asked, options = parsed  # cue words are read outside the options: "The Last Hunt"
    sign = direction(asked)
    return None if sign is None else DateComparison(options, sign, event(asked))


def is_date_comparison(question: str) -> bool:
    """A "which one, A or B?" question with a direction the rule can compare in."""
    return parse_comparison(question) is not None


@dataclass
class _Chain:
    """What the rows give for one option: the dates found (each with the rows that led
    to it) and the names reached that no further row leads on from."""

    dates: dict[str, tuple[Date, list[dict[str, Any]]]]
    ends: list[str]

    def date(self) -> tuple[Date, list[dict[str, Any]]] | None:
        """The one date, or None when there is none or more than one."""
        return next(iter(self.dates.values())) if len(self.dates) == 1 else None


def _chain(
    option: str, rows: Sequence[dict[str, Any]], wanted_event: str, skip: Sequence[dict[str, Any]]
) -> _Chain:
    """Follow rows from those that name the option through the answers they give ("Who
    directed A?" -> "When was <director> born?"), at most COMPARISON_CHAIN_HOPS rows
    deep, keeping the dates of rows about the wanted event. Rows in `skip` are not
    followed."""
    dates: dict[str, tuple[Date, list[dict[str, Any]]]] = {}
    ends: list[str] = []
    frontier: list[tuple[str, list[dict[str, Any]]]] = [(option, [])]
    for _ in range(COMPARISON_CHAIN_HOPS):
        reached: list[tuple[str, list[dict[str, Any]]]] = []
        for name, path in frontier:
            leads_on = False
            for row in rows:
                if row in path or row in skip or not _mentions(row["sub_question"], name):
                    continue
                about = _about(row, wanted_event)
                leads_on = leads_on or not about
                date = parse_date(row["answer"])
                if date is None:
                    if not about:
                        reached.append((row["answer"], [*path, row]))
                elif not wanted_event or about:
                    dates.setdefault(str(date), (date, [*path, row]))
            if not leads_on:
                ends.append(name)
        frontier = reached
    return _Chain(dates, list(dict.fromkeys([*ends, *(name for name, _ in frontier)])))


def _answers_reached(option: str, rows: Sequence[dict[str, Any]]) -> set[str]:
    """The answers of the rows that name the option and of those that follow on from
    their answers, at most COMPARISON_CHAIN_HOPS rows deep, normalised."""
    reached: set[str] = set()
    frontier = [option]
    for _ in range(COMPARISON_CHAIN_HOPS):
        frontier = [
            row["answer"]
            for name in frontier
            for row in rows
            if _mentions(row["sub_question"], name)
            and normalize_answer(row["answer"]) not in reached
        ]
        reached |= {normalize_answer(name) for name in frontier}
    return reached


def option_reached(question: str, rows: Sequence[dict[str, Any]], answer: str) -> str | None:
    """The option a "which one, A or B?" question means when its answer names neither:
    the one whose chain of rows reached that answer ("Which film has the director born
    first, A or B?" answered with B's director), where exactly one did; else None."""
    parsed = comparison_options(question)
    norm = normalize_answer(answer)
    if parsed is None or not norm or norm in {"yes", "no"}:
        return None
    options = parsed[1]
    if any(_mentions(answer, option) or _mentions(option, answer) for option in options):
        return None
    reaching = [option for option in options if norm in _answers_reached(option, rows)]
    return reaching[0] if len(reaching) == 1 else None


def option_frontiers(options: Sequence[str], rows: Sequence[dict[str, Any]]) -> list[str] | None:
    """The name each option's chain of rows has reached: the option itself before any
    row, then the answer of the latest row that names it, and so on ("A" -> "Tom Clegg"
    once "Who directed A?" is answered). None unless the chains are equally long and end
    in different names: each option's next sub-question then asks the same of its own
    name, and can be asked at once with the others (`for_each_option`). A chain that
    fell behind (its step found nothing) is left to the writer, one step at a time."""
    if len(options) < 2:
        return None
    both = [r for r in rows if all(_mentions(r["sub_question"], o) for o in options)]
    reached: list[tuple[str, int]] = []
    for option in options:
        name, used = option, []
        while len(used) < COMPARISON_CHAIN_HOPS:
            row = next(
                (
                    r
                    for r in reversed(rows)
                    if r not in used and r not in both and _mentions(r["sub_question"], name)
                ),
                None,
            )
            if row is None:
                break
            name, used = row["answer"], [*used, row]
        reached.append((name, len(used)))
    names = [name for name, _ in reached]
    if len({depth for _, depth in reached}) > 1 or len(set(map(normalize_answer, names))) < len(
        names
    ):
        return None
    return names


def _written(sub_question: str, name: str) -> str | None:
    """The words of `sub_question` that name `name`, as written there (case aside, with
    or without its parenthetical qualifier); None where they are not found as such."""
    for variant in dict.fromkeys((name, _PARENTHESIS.sub("", name))):
        found = re.search(rf"(?<!\w){re.escape(variant)}(?!\w)", sub_question, re.IGNORECASE)
        if found:
            return found.group(0)
    return None


def for_each_option(sub_question: str, frontiers: Sequence[str]) -> list[str]:
    """The sub-question asked of every option's frontier (`option_frontiers`), in the
    options' order: the writer's "Who directed A?" becomes "Who directed B?" for B. Empty
    unless it names exactly one frontier, in words found as such."""
    named = [name for name in frontiers if _mentions(sub_question, name)]
    written = _written(sub_question, named[0]) if len(named) == 1 else None
    if written is None:
        return []
    return [
        sub_question if name == named[0] else sub_question.replace(written, name)
        for name in frontiers
    ]


def compare_dates(question: str, rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The option a date-comparison question asks for, from the QA table alone, with the
    dates and rows that decide it; None when the rule cannot decide."""
    comparison = parse_comparison(question)
    if comparison is None:
        return None
    both = comparison.naming_both(rows)
    dated = [_chain(o, rows, comparison.event, both).date() for o in comparison.options]
    if dated[0] is None or dated[1] is None:
        return None
    order = dated[0][0].order(dated[1][0])
    if order is None:
        return None
    options = comparison.options
    winner = 0 if order == comparison.sign else 1
    return {
        "answer": options[winner],
        "values": {option: str(d[0]) for option, d in zip(options, dated, strict=True)},
        "rows": [row["sub_question"] for d in dated for row in d[1]],
        "passage_ids": sorted({pid for d in dated for row in d[1] for pid in row["passage_ids"]}),
    }


def missing_dates(question: str, rows: Sequence[dict[str, Any]]) -> str:
    """What a date comparison still lacks, in words for the sub-question writer ("when
    Doug Liman was born"); empty when it lacks nothing or is no date comparison."""
    comparison = parse_comparison(question)
    if comparison is None:
        return ""
    both = comparison.naming_both(rows)
    lacking = []
    for option in comparison.options:
        chain = _chain(option, rows, comparison.event, both)
        if chain.date() is None:
            lacking += [name for name in chain.ends if parse_date(name) is None]
    form = {"birth": "when {} was born", "death": "when {} died"}.get(
        comparison.event, "the date of {}"
    )
    return "; ".join(form.format(name) for name in dict.fromkeys(lacking))


def asks_whether_same_value(question: str) -> bool:
    """A yes/no question whether two things share something ("Are A and B of the same
    nationality?"). Its openers (`_YES_NO_OPENERS`, read off the first SQuAD-normalised
    word) are fewer than `prompts.is_yes_no_question`'s: "Can A and B be the same?" is
    not one. (Not `tools.question_rules.may_share_an_answer`, which compares two
    sub-questions.)"""
    words = normalize_answer(question).split()
    return "same" in words and words[0] in _YES_NO_OPENERS


def decided_by_rule(question: str) -> bool:
    """A comparison the QA table's rules can decide (`compare_dates`, `same_value`): its
    facts are better gathered one sub-question at a time than read in one call."""
    return is_date_comparison(question) or asks_whether_same_value(question)


def same_value(question: str, rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """ "yes" to a "do A and B share the same ...?" question when the table's two chains
    end in the same answer ("Who directed A?" -> X, "What is the nationality of X?" ->
    Italian, and the same for B). Different answers are left to the LLM: "Italy" and
    "Italian" differ in words, not in fact."""
    if not asks_whether_same_value(question):
        return None
    leaves = [
        row
        for row in rows
        if not any(
            _mentions(other["sub_question"], row["answer"]) for other in rows if other is not row
        )
    ]
    if len(leaves) != 2:
        return None
    values = [normalize_answer(row["answer"]) for row in leaves]
    if not values[0] or values[0] != values[1]:
        return None
    return {
        "answer": "yes",
        "values": {row["sub_question"]: row["answer"] for row in leaves},
        "rows": [row["sub_question"] for row in rows],
        "passage_ids": sorted({pid for row in rows for pid in row["passage_ids"]}),
    }


def as_tool() -> BaseTool:
    """The date comparison as a LangChain tool, for agents and Studio."""
    return StructuredTool.from_function(
        compare_dates,
        name="compare_dates",
        description='Answer a "which came first / who is older, A or B?" question from '
        "QA-table rows (dicts with sub_question, answer, passage_ids) by comparing the "
        "dates they give; null when the rows do not decide it.",
    )
