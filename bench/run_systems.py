"""End-to-end runs: systems on a slice of each benchmark's dev questions, through
`hoprag eval` (resumable: rerun the same command after a stop).

    .venv/bin/python -m bench.run_systems [--slice tuning|validation] [--limit N]
        [--systems vanilla oracle ...] [--benchmarks musique ...]

The tuning slice (the default) is the first 60 dev questions, on which every lever is
chosen; the validation slice is dev questions 61 and up, held apart from tuning: a lever
is adopted only when it agrees (issue 52). `--limit N` runs only the slice's first N.

`deft-noexpand`, `deft-none2`, `deft-direct`, `deft-zeroshot`, `deft-nocache`,
`deft-plan`, `deft-alldirect` and `chainrag-context` are DeFT's sub-question loop alone
(no sentence-graph expansion, no direct answer), the same reading only the top 2
passages where none passes the relevance filter (`HOPRAG_NONE_KEPT=2`), the same
answering shallow questions directly when DM_direct says their passages suffice
(`HOPRAG_DIRECT_ANSWER=on`), DeFT without the trained DM, without the QA cache, with its
sub-questions planned first (`HOPRAG_SUB_QUESTIONS=plan`), DeFT answering directly every
question its QA table's rules do not decide (both thresholds of the direct-answer check
at 0), and ChainRAG with CxtInt;
the graph is built first where an index lacks it. `--tag T` names the folders
BENCHMARK-SYSTEM-T: such runs stay out of docs/BENCHMARKS.md, whose tables show the
systems and the variants above.

Run folders land in bench/results/eval/BENCHMARK-SYSTEM/ (BENCHMARK-SYSTEM-validation/
for the validation slice); `python -m bench.render` turns them into docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from app.index.graph_build import GRAPH_FILE
from app.settings import ALL_RULES_OFF, RULE_FAMILIES, Settings
from bench.common import (
    BENCHMARKS,
    DEFAULT_SLICE,
    RESULTS,
    ROOT,
    SLICES,
    TUNING_SIZE,
    require_data,
    run_name,
)

HOPRAG = str(ROOT / ".venv" / "bin" / "hoprag")
SYSTEMS = ("vanilla", "oracle", "deft", "closed_book", "iterative", "chainrag")
# Run folders for a system under other settings: name -> (system, environment).
VARIANTS = {
    # the sub-question loop alone, as the committed runs of these two were made
    "deft-noexpand": ("deft", {"HOPRAG_GRAPH_EXPANSION": "off", "HOPRAG_DIRECT_ANSWER": "off"}),
    "deft-none2": (
        "deft",
        {"HOPRAG_GRAPH_EXPANSION": "off", "HOPRAG_DIRECT_ANSWER": "off", "HOPRAG_NONE_KEPT": "2"},
    ),
    "deft-direct": ("deft", {"HOPRAG_GRAPH_EXPANSION": "off", "HOPRAG_DIRECT_ANSWER": "on"}),
    "deft-zeroshot": ("deft", {"HOPRAG_TRAINED_DM": "off"}),
    "deft-nocache": ("deft", {"HOPRAG_QA_CACHE": "off"}),
    "deft-plan": ("deft", {"HOPRAG_SUB_QUESTIONS": "plan"}),
    # every question the QA table's rules do not decide answered directly, its depth and
    # direct probabilities still traced (docs/decisions.md: the direct-answer threshold)
    "deft-alldirect": ("deft", {"HOPRAG_TAU_SHALLOW": "0", "HOPRAG_TAU_DIRECT": "0"}),
    "chainrag-context": ("chainrag", {"HOPRAG_CHAIN_INTEGRATION": "context"}),
    # the rules audit (issue 52): the papers' method alone, and the default less one family
    "deft-lean": ("deft", {"HOPRAG_RULES_OFF": ALL_RULES_OFF}),
    **{f"deft-no-{f}": ("deft", {"HOPRAG_RULES_OFF": f}) for f in RULE_FAMILIES},
}


def slice_args(slice_: str, limit: int | None = None) -> list[str]:
    """The `hoprag eval run` options that select a slice's questions, at most `limit`."""
    offset, size = SLICES[slice_]
    count = limit if size is None else size if limit is None else min(size, limit)
    return [
        *(["--offset", str(offset)] if offset else []),
        *(["--limit", str(count)] if count else []),
    ]


def eval_command(data: Path, bench: str, system: str, out: Path, *selection: str) -> list[str]:
    """`hoprag eval` of `system` on the benchmark's dev questions that `selection` (its
    options: a slice, a file of ids) picks, into run folder `out`."""
    questions = str(data / bench / "questions.json")
    return [
        *(HOPRAG, "eval", "--data", questions, "--index", bench, "--split", "dev"),
        *selection,
        *("--system", system, "--out", str(out), "--quiet"),
    ]


def prepare_index(data: Path, bench: str) -> None:
    """The benchmark's index and sentence graph, built where missing (no-op when the
    index is up to date)."""
    subprocess.run(
        [HOPRAG, "index", str(data / bench / "corpus.json"), "--name", bench, "--quiet"],
        check=True,
    )
    if not (Settings().indexes_dir / bench / GRAPH_FILE).is_file():
        subprocess.run([HOPRAG, "graph", "build", "--index", bench, "--quiet"], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--slice",
        choices=list(SLICES),
        default=DEFAULT_SLICE,
        help=f"dev questions: tuning, the first {TUNING_SIZE}; validation, all after them",
    )
    parser.add_argument("--limit", type=int, help="only the slice's first N questions")
    parser.add_argument(
        "--systems", nargs="+", default=list(SYSTEMS), choices=[*SYSTEMS, *VARIANTS]
    )
    parser.add_argument("--benchmarks", nargs="+", default=list(BENCHMARKS))
    parser.add_argument(
        "--tag", default="", help="suffix for the run folders (runs apart from the main table)"
    )
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    if args.tag in SLICES:
        parser.error(f"--tag {args.tag} names a slice: use --slice {args.tag}")
    data = require_data(args.benchmarks)
    # `kill` stops the run this started too, as Ctrl-C does: subprocess.run kills its
    # child on any exception (a cut-short results line is dropped and its question reruns).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    for bench in args.benchmarks:
        prepare_index(data, bench)
    for name in args.systems:
        system, env = VARIANTS.get(name, (name, {}))
        for bench in args.benchmarks:
            out = RESULTS / "eval" / run_name(bench, name, args.slice, args.tag)
            print(f"== {bench} / {name} -> {out}", flush=True)
            if system == "deft" and not (out / "results.jsonl").is_file():
                # A fresh run starts with a cold QA cache, so its hit rate is its own.
                subprocess.run([HOPRAG, "cache", "clear", "--index", bench, "--yes"], check=True)
            proc = subprocess.run(
                eval_command(data, bench, system, out, *slice_args(args.slice, args.limit)),
                env={**os.environ, **env},
            )
            if proc.returncode != 0:
                sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
