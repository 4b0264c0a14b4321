"""What `hoprag eval` leaves in a run folder: scores in results.jsonl (kept in git), each
question's trace in traces.jsonl.gz (ignored by git), the date in run.json, and a resume
after a kill that cut either file short. The graph and the stores are stand-ins, so no
model loads."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import app.eval.run as run
from app.errors import UserError
from app.settings import Settings
from tests.conftest import ROOT, SAMPLE_QUESTIONS


class Meter:
    def __init__(self) -> None:
        self.calls = 0

    def snapshot(self) -> dict[str, int]:
        return {"llm_calls": self.calls, "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0}


class Graph:
    """Answers each question with its id after two traced steps; `fail_on` raises
    instead, as a run stopped mid-way."""

    def __init__(self, meter: Meter, fail_on: str = "") -> None:
        self.meter, self.fail_on, self.asked = meter, fail_on, []

    def stream(self, state: dict[str, Any], **_: Any):
        """Streamed as with `subgraphs=True`: (namespace, mode, chunk); the retrieval runs
        in a subgraph, as DeFT's steps do, whose node's own update is not traced."""
        question = state["question"]
        self.asked.append(question)
        if question == self.fail_on:
            raise KeyboardInterrupt
        self.meter.calls += 1
        passages = [{"id": 0, "text": "two words"}]
        inside = ("step:1",)
        yield inside, "updates", {"retrieve": {"passages": passages, "query": question}}
        yield inside, "values", {"passages": passages}
        yield (), "updates", {"step": {"passages": passages}}
        yield (), "updates", {"answer": {"answer": f"answer to {question}"}}
        yield (), "values", {"answer": f"answer to {question}", "passages": passages}


class Stores:
    def __init__(self) -> None:
        self.manifest = {"fingerprint": "f" * 64}

    def __len__(self) -> int:
        return 24

    def close(self) -> None:
        pass


@pytest.fixture
def graph(monkeypatch: pytest.MonkeyPatch) -> Graph:
    meter = Meter()
    made = Graph(meter)

    class Resources:
        gateway = type("Gateway", (), {"meter": meter})()

        @classmethod
        def open(cls, settings: Settings, index: str) -> Resources:
            return cls()

        def close(self) -> None:
            pass

    monkeypatch.setattr(run, "Resources", Resources)
    monkeypatch.setattr(run, "build_system", lambda system, resources: made)
    monkeypatch.setattr(run.CorpusIndex, "open", lambda settings, name: Stores())
    return made


def _eval(out: Path, limit: int = 3) -> dict[str, Any]:
    settings = Settings().with_overrides(judge="off")
    return run.run_eval(
        settings,
        data=SAMPLE_QUESTIONS,
        index="sample",
        system="vanilla",
        out=out,
        limit=limit,
        progress=False,
    )


def _results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / run.RESULTS).read_text().splitlines()]


def _questions(n: int) -> list[str]:
    return [q["question"] for q in json.loads(SAMPLE_QUESTIONS.read_text())[:n]]


def test_scores_go_to_results_and_traces_to_a_gzip_beside_them(graph: Graph, tmp_path: Path):
    out = tmp_path / "run"
    summary = _eval(out)
    assert summary["all"]["n"] == 3
    records = _results(out)
    assert [r["id"] for r in records] == ["sample-1", "sample-2", "sample-3"]
    assert all("trace" not in r for r in records)
    assert records[0]["prediction"] == f"answer to {_questions(1)[0]}"
    assert records[0]["words_fed"] == 2 and records[0]["llm_calls"] == 1
    with gzip.open(out / run.TRACES, "rt") as fh:  # any gzip reader takes it
        rows = [json.loads(line) for line in fh]
    assert [row["id"] for row in rows] == ["sample-1", "sample-2", "sample-3"]
    assert [step["node"] for step in rows[0]["trace"]] == ["retrieve", "answer"]
    assert rows[0]["trace"][0]["passage_ids"] == [0]
    config, traced = run.load_traced_run(out)
    assert [r["trace"] for r in traced] == [row["trace"] for row in rows]
    assert {k: v for k, v in traced[0].items() if k != "trace"} == records[0]
    assert config["date"] == run._today() and config["system"] == "vanilla"


def test_git_ignores_the_traces_and_keeps_the_scores() -> None:
    def ignored(path: str) -> bool:
        check = ["git", "check-ignore", "-q", "--no-index", path]
        return subprocess.run(check, cwd=ROOT).returncode == 0

    assert ignored("bench/results/eval/musique-deft/traces.jsonl.gz")
    assert ignored("bench/results/archive/musique-deft-x/traces.jsonl.gz")
    assert not ignored("bench/results/eval/musique-deft/results.jsonl")
    assert not ignored("bench/results/eval/musique-deft/run.json")


def test_committed_results_hold_no_traces() -> None:
    """bench/results stays small: the per-question scores only."""
    committed = subprocess.run(
        ["git", "ls-files", "bench/results"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    assert not [p for p in committed if p.endswith(run.TRACES)]
    sizes = [(ROOT / p).stat().st_size for p in committed if (ROOT / p).is_file()]
    assert sum(sizes) < 20 * 2**20  # issue 55: bench/results under 20 MB
    for path in (p for p in committed if p.endswith(run.RESULTS)):
        with (ROOT / path).open() as fh:
            assert all("trace" not in json.loads(line) for line in fh), path


def test_a_resumed_run_skips_finished_questions_and_mends_cut_files(
    graph: Graph, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    *_, third, fourth = _questions(4)
    graph.fail_on = third
    with pytest.raises(KeyboardInterrupt):
        _eval(out, limit=4)
    assert [r["id"] for r in _results(out)] == ["sample-1", "sample-2"]
    # A SIGKILL mid-write: half a gzip member of traces and half a line of scores.
    with (out / run.TRACES).open("ab") as fh:
        fh.write(gzip.compress(b'{"id": "sample-3", "trace": []}\n')[:20])
    with (out / run.RESULTS).open("a") as fh:
        fh.write('{"id": "sample-3", "predic')
    assert set(run.read_traces(out)) == {"sample-1", "sample-2"}  # the cut member skipped
    before = (out / run.RESULTS).read_text().splitlines()[:2]
    graph.fail_on, graph.asked = "", []
    _eval(out, limit=4)
    assert graph.asked == [third, fourth]  # finished questions were not run again
    assert (out / run.RESULTS).read_text().splitlines()[:2] == before
    assert [r["id"] for r in _results(out)] == ["sample-1", "sample-2", "sample-3", "sample-4"]
    traces = run.read_traces(out)
    assert list(traces) == ["sample-1", "sample-2", "sample-3", "sample-4"]
    assert all(len(t) == 2 for t in traces.values())
    with gzip.open(out / run.TRACES, "rt") as fh:  # the cut member is gone
        assert len(fh.readlines()) == 4


def test_a_question_rerun_after_a_kill_keeps_its_newest_trace(tmp_path: Path) -> None:
    """The trace is written before the scores, so a kill between them reruns the
    question and appends a second trace; the last one written is the run's."""
    run.append_traces(tmp_path / run.TRACES, [{"id": "q", "trace": [{"node": "old"}]}])
    run.append_traces(tmp_path / run.TRACES, [{"id": "q", "trace": [{"node": "new"}]}])
    assert run.read_traces(tmp_path) == {"q": [{"node": "new"}]}


def test_the_date_of_a_resumed_run_is_kept_until_it_writes_again(
    graph: Graph, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    _eval(out, limit=1)
    config = json.loads((out / run.RUN).read_text())
    (out / run.RUN).write_text(json.dumps({**config, "date": "2025-01-02"}))
    _eval(out, limit=1)  # nothing left to answer
    assert json.loads((out / run.RUN).read_text())["date"] == "2025-01-02"
    _eval(out, limit=2)
    assert json.loads((out / run.RUN).read_text())["date"] == run._today()
    assert not list(out.glob(".*"))


def test_missing_traces_are_one_clear_error(graph: Graph, tmp_path: Path) -> None:
    out = tmp_path / "run"
    _eval(out, limit=2)
    assert len(run.load_run(out)[1]) == 2  # scores alone need no traces
    (out / run.TRACES).unlink()
    with pytest.raises(UserError, match=r"has no traces\.jsonl\.gz") as raised:
        run.load_traced_run(out)
    assert "\n" not in raised.value.message
    run.append_traces(out / run.TRACES, [{"id": "sample-1", "trace": []}])
    with pytest.raises(UserError, match=r"1 of the 2 questions .* no trace"):
        run.load_traced_run(out)


def test_bench_scripts_say_in_one_line_that_traces_are_missing(
    graph: Graph, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.common import load_traced

    out = tmp_path / "run"
    _eval(out, limit=1)
    assert load_traced(str(out))[1][0]["trace"][0]["node"] == "retrieve"
    (out / run.TRACES).unlink()
    with pytest.raises(SystemExit) as exited:
        load_traced(str(out))
    assert exited.value.code != 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: ") and "has no traces.jsonl.gz" in err[0]
