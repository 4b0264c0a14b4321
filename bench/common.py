"""Shared bits of the benchmark scripts: where the data is, machine facts, result files."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.checks import check_benchmarks
from app.errors import UserError, exit_with
from app.settings import BENCHMARKS, Settings

ROOT = Path(__file__).resolve().parents[1]
DATA = Settings().data  # HOPRAG_DATA, else HOPRAG_HOME/data
RESULTS = ROOT / "bench" / "results"

TUNING_SIZE = 60  # the first dev questions of each benchmark, the ones levers are tuned on
# Slices of each dev split (issue 52): name -> (questions skipped, questions run or None
# for all the rest). Validation, the dev questions after the tuning ones, is never tuned on.
SLICES = {"tuning": (0, TUNING_SIZE), "validation": (TUNING_SIZE, None)}
DEFAULT_SLICE = "tuning"


def require_data(names: Sequence[str] = BENCHMARKS) -> Path:
    """The benchmark folder, or one clear line saying where to put it."""
    try:
        return check_benchmarks(DATA, names)
    except UserError as exc:
        exit_with(exc)


def machine(gpu: str | None = None) -> str:
    """The machine in words; `gpu` names the accelerator a script ran on, if any."""
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.machine()}, {os.cpu_count()} cores, {mem_gib:.0f} GiB, {gpu or 'no GPU'}"


def save(name: str, payload: dict[str, Any], gpu: str | None = None) -> Path:
    """Write one benchmark's results with date and machine, for docs/BENCHMARKS.md."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    payload = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(gpu),
        **payload,
    }
    out.write_text(json.dumps(payload, indent=2))
    return out


def run_name(bench: str, system: str, slice_: str = DEFAULT_SLICE, tag: str = "") -> str:
    """A run's folder name under bench/results/eval: BENCH-SYSTEM[-TAG], then `-SLICE` for
    any slice but the default, whose folders keep the names they had before slices."""
    return "-".join(filter(None, (bench, system, tag, "" if slice_ == DEFAULT_SLICE else slice_)))


def load_results(name: str) -> dict[str, Any] | None:
    """A benchmark's saved results (`save`), or None before its first run."""
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def find_run(name: str) -> Path:
    """A run folder named by path, or by name under bench/results/eval or archive."""
    for folder in (Path(name), RESULTS / "eval" / name, RESULTS / "archive" / name):
        if (folder / "results.jsonl").is_file():
            return folder
    raise SystemExit(f"no run {name!r} with a results.jsonl")


def load_traced(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run named as `find_run` takes it, each record with its trace from the run's
    traces.jsonl.gz (which git does not keep); one clear line where they are missing."""
    from app.eval.run import load_traced_run

    try:
        return load_traced_run(find_run(name))
    except UserError as exc:
        exit_with(exc)


def trace_states(record: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each traced step of a DeFT run with the state it started from (the QA-table rows and
    unanswerable sub-questions written before it), so that a step can be replayed."""
    state: dict[str, Any] = {"qa_table": [], "unanswerable": []}
    for step in record["trace"]:
        yield step, state
        state = {
            "qa_table": state["qa_table"] + (step.get("qa_table") or []),
            "unanswerable": state["unanswerable"] + (step.get("unanswerable") or []),
        }


def questions(benchmark: str, split: str = "dev") -> list[dict[str, Any]]:
    items = json.loads((require_data([benchmark]) / benchmark / "questions.json").read_text())
    return [q for q in items if q.get("split") == split]


def run_measured(args: list[str]) -> tuple[float, float, str]:
    """Run a command as a child; its wall seconds, peak RSS in GiB (from wait4, the
    child's own usage) and stdout. Exits with its stderr when it fails."""
    # Files, not pipes: a child that writes more than a pipe holds (progress bars) would
    # block forever while we wait for it.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args[1:3])} failed: {stderr.strip()[-2000:]}")
    return seconds, usage.ru_maxrss / 2**20, stdout


def summarise_runs(script: str, summarise: Callable[[str], dict[str, Any]], doc: str) -> None:
    """The command line of a script that reads committed runs: `summarise` each RUN named,
    print its row and save them all as `bench/results/SCRIPT.json` with the command."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("runs", nargs="+")
    runs = parser.parse_args().runs
    rows = [summarise(run) for run in runs]
    for row in rows:
        print(row)
    save(script, {"command": f"python -m bench.{script} " + " ".join(runs), "rows": rows})


def run_per_corpus(script: str, build: Callable[[str], dict[str, Any]]) -> None:
    """`build` each corpus named on the command line (default: all three), printing and
    saving `bench/results/SCRIPT.json` after each, so a stopped run keeps what it measured."""
    names = sys.argv[1:] or list(BENCHMARKS)
    rows = []
    for name in names:
        rows.append(build(name))
        print(f"{name}: {rows[-1]['seconds']}s, peak {rows[-1]['peak_rss_gib']} GiB", flush=True)
        save(script, {"command": f"python -m bench.{script} " + " ".join(names), "rows": rows})
