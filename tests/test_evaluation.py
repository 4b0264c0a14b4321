"""The evaluation harness: input checks before any model loads, real runs of the
baselines on the sample benchmark, resume after a kill, compare, and the HTML report
opened in a real headless browser."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from app.errors import UserError
from app.eval.report import compare_runs
from app.eval.run import (
    chainrag_signature,
    code_version,
    deft_signature,
    read_traces,
    run_eval,
)
from app.settings import Settings
from graph.resources import Resources
from tests.conftest import HOPRAG, SAMPLE_CORPUS, SAMPLE_QUESTIONS, assert_user_error, run_cli


@pytest.fixture
def no_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail loudly if anything tries to load models or stores."""

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the input was checked")

    monkeypatch.setattr(Resources, "open", refuse)
    monkeypatch.setattr("app.eval.run.build_index", refuse)


def _questions(tmp_path: Path, mutate) -> Path:
    items = json.loads(SAMPLE_QUESTIONS.read_text())
    mutate(items)
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(items))
    return path


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda qs: qs[2].pop("answer"), "missing field 'answer'"),
        (lambda qs: qs[0].update(question=""), "non-empty string"),
        (lambda qs: qs[1].update(id=qs[0]["id"]), "appears twice"),
        (lambda qs: qs[3].update(gold_corpus_idx=[2, 999]), "names gold passage 999"),
        (lambda qs: qs[3].update(gold_corpus_idx="2"), "list of passage positions"),
    ],
)
def test_bad_questions_fail_before_models_load(
    settings: Settings, tmp_path: Path, no_models, mutate, needle: str
) -> None:
    with pytest.raises(UserError, match=needle):
        run_eval(
            settings,
            data=_questions(tmp_path, mutate),
            corpus=SAMPLE_CORPUS,
            system="vanilla",
            out=tmp_path / "run",
        )
    assert not (tmp_path / "run").exists()


def test_unknown_ids_system_and_missing_files(
    settings: Settings, tmp_path: Path, no_models
) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("sample-1\nsample-404\n")
    with pytest.raises(UserError, match="sample-404"):
        run_eval(
            settings,
            data=SAMPLE_QUESTIONS,
            corpus=SAMPLE_CORPUS,
            system="vanilla",
            out=tmp_path / "run",
            ids_file=ids,
        )
    with pytest.raises(UserError, match="unknown system 'magic'"):
        run_eval(
            settings,
            data=SAMPLE_QUESTIONS,
            corpus=SAMPLE_CORPUS,
            system="magic",
            out=tmp_path / "run",
        )
    with pytest.raises(UserError, match="does not exist"):
        run_eval(
            settings,
            data=tmp_path / "nope.json",
            corpus=SAMPLE_CORPUS,
            system="vanilla",
            out=tmp_path / "run",
        )


def test_folder_of_another_run_is_never_overwritten(
    settings: Settings, tmp_path: Path, no_models
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"system": "oracle"}))
    (out / "results.jsonl").write_text('{"id": "sample-1"}\n')
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(UserError, match="other settings"):
        run_eval(settings, data=SAMPLE_QUESTIONS, corpus=SAMPLE_CORPUS, system="vanilla", out=out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty"):
        run_eval(settings, data=SAMPLE_QUESTIONS, corpus=SAMPLE_CORPUS, system="vanilla", out=stray)


@pytest.mark.e2e  # the installed CLI
def test_cli_bad_input_is_one_line(home: Path, tmp_path: Path) -> None:
    proc = run_cli(
        "eval",
        "--data",
        str(tmp_path / "missing.json"),
        "--corpus",
        str(SAMPLE_CORPUS),
        "--system",
        "vanilla",
        "--out",
        str(tmp_path / "o"),
        home=home,
    )
    assert_user_error(proc, "does not exist")


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.e2e  # the installed CLI and the real chat model
def test_resume_after_kill_never_repeats_a_finished_question(
    home: Path, tmp_path: Path, sample_index: str
) -> None:
    out = tmp_path / "vanilla"
    args = [
        HOPRAG,
        "eval",
        "--data",
        str(SAMPLE_QUESTIONS),
        "--index",
        sample_index,
        "--system",
        "vanilla",
        "--out",
        str(out),
        "--limit",
        "3",
        "--quiet",
    ]
    env = {**os.environ, "HOPRAG_HOME": str(home)}
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    results = out / "results.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if results.is_file() and results.read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its llama.cpp server, mid-run
    proc.wait()
    first = _lines(results)
    assert 1 <= len(first) < 3
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    records = _lines(results)
    assert [r["id"] for r in records] == ["sample-1", "sample-2", "sample-3"]
    assert records[: len(first)] == first  # finished questions were not run again
    traces = read_traces(out)  # beside the scores, in traces.jsonl.gz
    assert list(traces) == ["sample-1", "sample-2", "sample-3"]
    for r in records:
        assert r["llm_calls"] == 1 and len(r["passages_fed"]) == 5 and "trace" not in r
        assert [step["node"] for step in traces[r["id"]]] == [
            "take_question",
            "retrieve_for_question",
            "answer_from_passages",
            "reply",
        ]
    run_file = json.loads((out / "run.json").read_text())
    assert run_file["date"] and run_file["code"] == [code_version()]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["all"]["n"] == 3 and "same model" in summary["judge"]


@pytest.mark.e2e  # the real chat model, a browser
def test_baselines_compare_and_report(
    home: Path, tmp_path: Path, settings: Settings, sample_index: str
) -> None:
    runs = {}
    # Two questions where `eval compare` pairs them; iterative, the slow one, reasons once.
    for system, limit in (("oracle", 2), ("closed_book", 2), ("iterative", 1)):
        runs[system] = tmp_path / system
        run_eval(
            settings,
            data=SAMPLE_QUESTIONS,
            index=sample_index,
            system=system,
            out=runs[system],
            limit=limit,
            progress=False,
        )
    oracle = _lines(runs["oracle"] / "results.jsonl")
    assert all(r["coverage"] == 1.0 and r["llm_calls"] == 1 for r in oracle)
    assert oracle[0]["passages_fed"] == [0, 6, 14]
    closed = _lines(runs["closed_book"] / "results.jsonl")
    assert all(r["passages_fed"] == [] and r["words_fed"] == 0 for r in closed)
    iterative = read_traces(runs["iterative"]).values()
    assert all(1 <= sum(s["node"] == "reason_step" for s in trace) <= 4 for trace in iterative)

    compared = run_cli("eval", "compare", str(runs["closed_book"]), str(runs["oracle"]), home=home)
    assert compared.returncode == 0, compared.stderr
    assert "mcnemar" in compared.stdout.lower() and "2 shared questions" in compared.stdout

    report_dir = tmp_path / "report"
    made = run_cli("eval", "report", *map(str, runs.values()), "--out", str(report_dir), home=home)
    assert made.returncode == 0, made.stderr
    _assert_report_renders(report_dir / "report.html")


def _assert_report_renders(report: Path) -> None:
    """Open the report in headless Chromium and check that every plot decoded."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Chromium is missing: `make test` installs Debian's chromium"
    probe = report.with_name("probe.html")
    probe.write_text(
        report.read_text().replace(
            "</body>",
            "<script>window.addEventListener('load', () => { const imgs = [...document.images];"
            " document.body.setAttribute('data-loaded', imgs.filter(i => i.complete &&"
            " i.naturalWidth > 0).length + '/' + imgs.length); });</script></body>",
        )
    )
    dom = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={report.parent / 'chrome-profile'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert 'data-loaded="3/3"' in dom, dom[:500]
    assert len(list(report.parent.glob("*.png"))) == 3


def test_a_run_signature_names_the_decision_model_that_judged() -> None:
    on, off = Settings(), Settings().with_overrides(trained_dm=False)
    assert "trained_dm=off" in deft_signature(off) and "trained_dm=off" in chainrag_signature(off)
    assert "trained_dm=off" not in deft_signature(on)  # the dm.json digest, or none
    assert deft_signature(on) != deft_signature(off)


def test_runs_record_their_prompts_and_compare_names_a_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "answer.md").write_text("## user\nPassages:\n{passages}\n")
    monkeypatch.setattr("app.eval.run.PROMPT_DIR", prompts)
    before = code_version()
    (prompts / "answer.md").write_text("## user\nPassages (quoted):\n{passages}\n")
    after = code_version()
    assert before["prompts"] != after["prompts"] and "commit" not in after  # no git here

    def run(name: str, *versions: dict[str, str]) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "run.json").write_text(
            json.dumps({"system": "deft", "index": "sample", "code": list(versions)})
        )
        (folder / "results.jsonl").write_text(json.dumps({"id": "q1", "em": 1.0}) + "\n")
        return folder

    a, b, c = run("a", before), run("b", after), run("c", before)
    assert compare_runs(a, c)["same_prompts"] and not compare_runs(a, b)["same_prompts"]
    resumed = run("resumed", before, after)  # a run resumed after a prompt edit
    assert not compare_runs(a, resumed)["same_prompts"]


def test_the_trace_keeps_what_a_step_found() -> None:
    from app.eval.run import _summarise_update

    comparison = {"answer": "B", "values": {"A": "1934", "B": "1914"}, "passage_ids": [1]}
    update = {"answer": "B", "comparison": comparison, "passages": [{"id": 3, "text": "x"}]}
    assert _summarise_update(update) == {
        "answer": "B",
        "comparison": comparison,
        "passage_ids": [3],
    }
