"""A `hoprag ask` run killed by SIGKILL, or whose Postgres checkpoint database stops
mid-run, is continued by `hoprag resume` to the answer an unbroken run gives without
redoing a finished LLM step; and no two processes run one thread at once.

Every run is a real `hoprag` child process against a stub chat model whose reply depends
on the prompt alone, so an unbroken run and a broken-then-resumed one get the same
replies, and the stub's request count is what each run cost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app.checkpoints import open_checkpointer, read_run
from app.postgres import postgres_bin
from app.settings import Settings
from bench.services import postgres_server
from tests.conftest import DEMO_QUESTION, ROOT, assert_user_error
from tests.fake_endpoint import FakeEndpoint, fake_endpoint

FIRST_HOP = "Where is Tavistrom College located?"
SECOND_HOP = "Which river flows through Brisk Hollow?"
SECOND_HOP_ANSWER = f"Question: {SECOND_HOP} Answer:"  # the prompt of the 4th of 5 calls
FINAL_ANSWER = f"Known facts: - {FIRST_HOP} Brisk Hollow - {SECOND_HOP} Ulden River"
# The stub's reply by how the prompt ends (whitespace collapsed): two hops, then the
# answer from the QA table; anything else is "unknown".
REPLIES = {
    f"Complex question: {DEMO_QUESTION} Simple question:": FIRST_HOP,
    "Answer: Brisk Hollow Simple question:": SECOND_HOP,
    f"Question: {FIRST_HOP} Answer:": "Brisk Hollow",
    SECOND_HOP_ANSWER: "Ulden River",
    f"{FINAL_ANSWER} Question: {DEMO_QUESTION} Answer:": "Ulden River",
}
WAIT_S = 120  # for a run to reach a held call, or to end, on a busy 2-core machine


@dataclass
class ScriptedEndpoint(FakeEndpoint):
    """Replies by the prompt, and holds the first request whose prompt contains `held_at`
    unanswered until `release()`: a run waiting there has finished every step before."""

    held_at: str = ""
    held: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def hold(self, prompt_part: str) -> threading.Event:
        self.held_at, self.held, self.released = prompt_part, threading.Event(), threading.Event()
        return self.held

    def release(self) -> None:
        self.released.set()

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = " ".join(body["messages"][-1]["content"].split())
        if self.held_at and self.held_at in prompt:
            self.held_at, released = "", self.released
            self.held.set()
            released.wait(WAIT_S)
        done = super().completion(body)
        reply = next((r for end, r in REPLIES.items() if prompt.endswith(end)), "unknown")
        done["choices"][0]["message"]["content"] = reply
        return done


@pytest.fixture(scope="module")
def endpoint() -> Iterator[ScriptedEndpoint]:
    with fake_endpoint(ScriptedEndpoint) as running:
        assert isinstance(running, ScriptedEndpoint)
        yield running
        running.release()


@pytest.fixture(scope="module")
def private_home(home: Path, sample_index: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home of its own (checkpoints, locks) that reads the session's models and index."""
    path = tmp_path_factory.mktemp("killed-runs")
    for name in ("models", "indexes"):
        (path / name).symlink_to(home / name, target_is_directory=True)
    return path


def env_for(home: Path, endpoint: FakeEndpoint, postgres_url: str = "") -> dict[str, str]:
    """A stub-model run of the sub-question loop (no direct answer: the loop has steps to
    kill between; no QA cache: every run asks the model the same)."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HOPRAG_HOME": str(home),
        "HOPRAG_LLM_BASE_URL": endpoint.url,
        "HOPRAG_LLM_MODEL": "stub",
        "HOPRAG_DIRECT_ANSWER": "off",
        "HOPRAG_QA_CACHE": "off",
        "HOPRAG_POSTGRES_URL": postgres_url,
    }


def start(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    out, err = proc.communicate(timeout=WAIT_S)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return finish(start(*args, env=env))


@dataclass
class Answered:
    """What a finished run printed (--json) and how many model calls it made."""

    payload: dict[str, Any]
    calls: int


@pytest.fixture(scope="module")
def unbroken(private_home: Path, endpoint: ScriptedEndpoint) -> Answered:
    before = endpoint.requests
    done = cli("ask", DEMO_QUESTION, "--json", env=env_for(private_home, endpoint))
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["answer"] == "Ulden River"
    assert [row["sub_question"] for row in payload["qa_table"]] == [FIRST_HOP, SECOND_HOP]
    assert endpoint.requests - before == payload["cost"]["llm_calls"] == 5
    return Answered(payload, endpoint.requests - before)


def held_run(
    endpoint: ScriptedEndpoint, prompt_part: str, *args: str, env: dict[str, str]
) -> tuple[subprocess.Popen[str], int]:
    """A run started and stopped at its call whose prompt contains `prompt_part`, and the
    calls it finished before that one."""
    before = endpoint.requests
    held = endpoint.hold(prompt_part)
    proc = start(*args, env=env)
    if not held.wait(WAIT_S):
        proc.kill()
        raise AssertionError(f"the run never reached {prompt_part!r}: {proc.communicate()[1]}")
    return proc, endpoint.requests - before - 1


def same_answer(resumed: subprocess.CompletedProcess[str], unbroken: Answered) -> int:
    """Checks that a resumed run ended as the unbroken one did; its model calls."""
    assert resumed.returncode == 0, resumed.stderr
    payload = json.loads(resumed.stdout)
    for key in ("answer", "qa_table", "passages", "citations"):
        assert payload[key] == unbroken.payload[key], key
    return int(payload["cost"]["llm_calls"])


def steps_of(settings: Settings, thread: str) -> list[str]:
    with open_checkpointer(settings, reading=thread) as saver:
        return [step.node for step in read_run(saver, thread).steps]


@pytest.mark.e2e  # processes that load the embedder and the index
def test_a_killed_run_resumes_to_the_unbroken_answer_and_runs_in_one_process(
    private_home: Path, endpoint: ScriptedEndpoint, unbroken: Answered
) -> None:
    env, thread = env_for(private_home, endpoint), f"killed-{uuid.uuid4().hex[:8]}"
    asked, finished = held_run(
        endpoint, SECOND_HOP_ANSWER, "ask", DEMO_QUESTION, "--thread", thread, env=env
    )
    asked.send_signal(signal.SIGKILL)  # while it waits for the second hop's answer
    assert finish(asked).returncode == -signal.SIGKILL
    endpoint.release()
    assert finished == 3  # two sub-questions written, the first answered
    settings = Settings(home=private_home)
    assert steps_of(settings, thread)[-1] == "select_evidence"

    before = endpoint.requests
    resuming, _ = held_run(endpoint, FINAL_ANSWER, "resume", thread, "--json", env=env)
    try:
        assert_user_error(
            cli("resume", thread, env=env),
            f"thread {thread!r} is already running in another hoprag process",
        )
    finally:
        endpoint.release()
    calls = same_answer(finish(resuming), unbroken)
    assert calls == endpoint.requests - before == 2  # the answer cut off, and the last
    assert finished + calls == unbroken.calls  # no finished call was made again
    assert steps_of(settings, thread) == steps_of(settings, unbroken.payload["thread_id"])
    assert_user_error(cli("resume", thread, env=env), "has finished")


def test_a_thread_lock_shuts_out_another_process_and_that_thread_alone(tmp_path: Path) -> None:
    """The SQLite lock: a byte per thread of one file, held while the block runs."""
    settings = Settings(home=tmp_path)
    other = (
        "from app.checkpoints import open_checkpointer; from app.settings import Settings\n"
        f"with open_checkpointer(Settings(home={str(tmp_path)!r}), running='{{}}'): pass"
    )

    def run_other(thread: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", other.format(thread)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=WAIT_S,
        )

    with open_checkpointer(settings, running="t1"):
        refused = run_other("t1")
        assert refused.returncode != 0 and "UserError: thread 't1' is already running" in (
            refused.stderr
        )
        assert run_other("t2").returncode == 0, "a lock on one thread shut out another"
    assert run_other("t1").returncode == 0, "the lock outlived its block"
    assert list(tmp_path.glob("*.lock")) == [tmp_path / "checkpoints.lock"]


def pg_ctl(data: Path, *args: str) -> None:
    """`pg_ctl` on the test's own cluster, as the user who owns it (root may not)."""
    owner = data.stat()
    who = {"user": owner.st_uid, "group": owner.st_gid} if os.geteuid() == 0 else {}
    log = data.parent / "server.log"
    proc = subprocess.run(
        [postgres_bin("pg_ctl"), "-D", str(data), "-l", str(log), "-w", *args],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        **who,  # type: ignore[arg-type]
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.e2e  # a PostgreSQL server
def test_postgres_stopped_mid_run_is_one_line_and_the_run_resumes_once_it_is_back(
    private_home: Path, endpoint: ScriptedEndpoint, unbroken: Answered
) -> None:
    import psycopg

    thread = f"pg-{uuid.uuid4().hex[:8]}"
    with postgres_server() as url:
        with psycopg.connect(url) as conn:
            data = Path(str(conn.execute("SHOW data_directory").fetchone()[0]))  # type: ignore[index]
        env = env_for(private_home, endpoint, url)
        asked, finished = held_run(
            endpoint, SECOND_HOP_ANSWER, "ask", DEMO_QUESTION, "--thread", thread, env=env
        )
        try:
            refused = cli("ask", DEMO_QUESTION, "--thread", thread, env=env)  # a new turn, too
            assert_user_error(refused, f"thread {thread!r} is already running")
            pg_ctl(data, "-m", "fast", "stop")
        finally:
            endpoint.release()
        try:
            stopped = finish(asked)
            assert_user_error(
                stopped,
                "the Postgres checkpoint database",
                "dropped the connection: ",
                "the run stopped, its finished steps are saved",
                f"`hoprag resume {thread}` continues it",
            )
            assert stopped.returncode == 3 and finished == 3
        finally:
            pg_ctl(data, "restart")  # with the options it ran with (postmaster.opts)

        settings = Settings(home=private_home, postgres_url=url)
        assert steps_of(settings, thread)[-1] == "select_evidence"  # kept, up to the stop
        before = endpoint.requests
        calls = same_answer(cli("resume", thread, "--json", env=env), unbroken)
        assert calls == endpoint.requests - before == 2
        assert finished + calls == unbroken.calls
        assert steps_of(settings, thread) == steps_of(
            Settings(home=private_home), unbroken.payload["thread_id"]
        )
