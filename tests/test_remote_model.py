"""A remote model endpoint (HOPRAG_LLM_BASE_URL): nothing local is started; a dropped
connection and a slow endpoint are retried, then reported in one clear line; and a run
they stop loses nothing: other processes trace it and resume it from its checkpoints,
in SQLite or in Postgres."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from app.checkpoints import open_checkpointer, read_run
from app.errors import ServiceError
from app.llm.gateway import EmbeddedServer, LLMGateway
from app.settings import Settings
from tests.conftest import ROOT, assert_user_error
from tests.fake_endpoint import FakeEndpoint, fake_endpoint

QUESTION = "Who founded Velloway Ironworks?"


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    with fake_endpoint() as running:
        yield running


@pytest.fixture
def nothing_local(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to set up the embedded llama.cpp server fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("an embedded LLM server was set up despite HOPRAG_LLM_BASE_URL")

    monkeypatch.setattr(EmbeddedServer, "__init__", refuse)


def remote(tmp_path: Path, url: str, **settings: float) -> LLMGateway:
    return LLMGateway(Settings(home=tmp_path, llm_base_url=url, llm_model="remote", **settings))


def test_a_remote_endpoint_answers_and_nothing_local_starts(
    tmp_path: Path, endpoint: FakeEndpoint, nothing_local: None
) -> None:
    gateway = remote(tmp_path, endpoint.url)
    assert gateway.invoke([HumanMessage("Who founded it?")]) == "Odile Farrengast"
    p = gateway.p_yes([HumanMessage("Is it?")])
    assert p == pytest.approx(math.exp(-0.1) / (math.exp(-0.1) + math.exp(-2.4)))
    assert gateway.meter.snapshot()["llm_calls"] == 2 and endpoint.requests == 2
    assert gateway.server is None and not (tmp_path / "logs").exists()
    gateway.close()


def test_a_dropped_connection_is_retried(
    tmp_path: Path, endpoint: FakeEndpoint, nothing_local: None
) -> None:
    endpoint.drop_first = 2
    gateway = remote(tmp_path, endpoint.url, llm_max_retries=2)
    assert gateway.invoke([HumanMessage("Who founded it?")]) == "Odile Farrengast"
    assert endpoint.requests == 3  # two dropped, the second retry answered


def test_a_connection_dropped_every_time_is_retried_then_reported(
    tmp_path: Path, endpoint: FakeEndpoint, nothing_local: None
) -> None:
    endpoint.mode = "drop"
    gateway = remote(tmp_path, endpoint.url, llm_max_retries=2)
    with pytest.raises(ServiceError) as caught:
        gateway.invoke([HumanMessage("Who founded it?")])
    assert endpoint.requests == 3
    assert str(caught.value.message) == (
        f"the LLM endpoint {endpoint.url} does not answer "
        "(Server disconnected without sending a response; 3 attempts with backoff)"
    )
    assert "HOPRAG_LLM_BASE_URL" in caught.value.hint


def test_a_slow_endpoint_is_waited_for_within_the_timeout(
    tmp_path: Path, endpoint: FakeEndpoint, nothing_local: None
) -> None:
    endpoint.mode, endpoint.delay_s = "slow", 0.5
    gateway = remote(tmp_path, endpoint.url, llm_timeout_s=5.0, llm_max_retries=0)
    assert gateway.invoke([HumanMessage("Who founded it?")]) == "Odile Farrengast"
    assert endpoint.requests == 1


def test_a_slow_endpoint_is_retried_then_reported(
    tmp_path: Path, endpoint: FakeEndpoint, nothing_local: None
) -> None:
    endpoint.mode, endpoint.delay_s = "slow", 3.0
    gateway = remote(tmp_path, endpoint.url, llm_timeout_s=0.5, llm_max_retries=1)
    with pytest.raises(ServiceError, match=r"timed out: no reply within 0.5s in 2 attempts"):
        gateway.invoke([HumanMessage("Who founded it?")])
    assert endpoint.requests == 2


# Runs through the command line: each step in a process of its own, as on two machines.


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.e2e)])
def postgres(request: pytest.FixtureRequest) -> str:
    """Where runs are checkpointed: "" (SQLite in HOPRAG_HOME) or a Postgres URL."""
    return request.getfixturevalue("postgres_url") if request.param == "postgres" else ""


@pytest.fixture
def private_home(home: Path, sample_index: str, tmp_path: Path) -> Path:
    """A home of its own (checkpoints, logs) that reads the session's models and index."""
    path = tmp_path / "home"
    path.mkdir()
    for name in ("models", "indexes"):
        (path / name).symlink_to(home / name, target_is_directory=True)
    return path


def cli(*args: str, home: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HOPRAG_HOME": str(home), **env},
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.e2e  # processes that load the embedder and the index
def test_a_run_the_endpoint_stops_is_traced_and_resumed_by_other_processes(
    private_home: Path, endpoint: FakeEndpoint, postgres: str
) -> None:
    env = {
        "HOPRAG_LLM_BASE_URL": endpoint.url,
        "HOPRAG_LLM_MODEL": "remote",
        "HOPRAG_LLM_MAX_RETRIES": "1",
        "HOPRAG_LLM_TIMEOUT_S": "1",
        "HOPRAG_TRAINED_DM": "off",
        "HOPRAG_POSTGRES_URL": postgres,
    }
    thread = f"remote-{uuid.uuid4().hex[:8]}"

    def stopped_before_the_reader() -> list[int]:
        """What another process's `hoprag trace`, and the checkpoints read here, hold:
        the steps before the reader, with the passages retrieved."""
        traced = cli("trace", thread, home=private_home, env=env)
        assert traced.returncode == 0, traced.stderr
        assert "vanilla on index sample, 2 steps, stopped" in traced.stdout.splitlines()[0]
        assert "\n[take_question]\n[retrieve_for_question]\n" in traced.stdout
        assert "stopped before: answer_from_passages" in traced.stdout
        settings = Settings(home=private_home, postgres_url=postgres)
        with open_checkpointer(settings, reading=thread) as saver:
            record = read_run(saver, thread)
        assert record.pending == ["answer_from_passages"]
        passages = record.values["passages"]
        assert "Velloway Ironworks" in [p["title"] for p in passages]
        return [p["id"] for p in passages]

    endpoint.mode = "drop"
    asked = cli("ask", QUESTION, "--system", "vanilla", "--thread", thread, home=private_home,
                env=env)  # fmt: skip
    assert_user_error(asked, "does not answer (Server disconnected",
                      "; 2 attempts with backoff)",
                      "finished steps are saved", f"hoprag resume {thread}")  # fmt: skip
    assert endpoint.requests == 2
    retrieved = stopped_before_the_reader()

    endpoint.mode, endpoint.delay_s = "slow", 3.0
    resumed = cli("resume", thread, home=private_home, env=env)
    assert_user_error(resumed, "timed out: no reply within 1s in 2 attempts",
                      "finished steps are saved")  # fmt: skip
    assert endpoint.requests == 4
    assert stopped_before_the_reader() == retrieved  # the failed resume lost nothing either

    endpoint.mode = "ok"
    resumed = cli("resume", thread, "--json", "--trace", home=private_home, env=env)
    assert resumed.returncode == 0, resumed.stderr
    answered = json.loads(resumed.stdout)
    assert answered["answer"] == "Odile Farrengast"
    assert [p["id"] for p in answered["passages"]] == retrieved
    steps = [line for line in resumed.stderr.splitlines() if line.startswith("[")]
    assert steps[0].startswith("[answer_from_passages]")  # retrieval was not redone
    assert endpoint.requests == 5
    traced = cli("trace", thread, home=private_home, env=env)
    assert "finished" in traced.stdout.splitlines()[0], traced.stderr
    assert "answer: Odile Farrengast" in traced.stdout
    assert_user_error(cli("resume", thread, home=private_home, env=env), "has finished")

    assert not list(private_home.glob("logs/llm-server-*"))  # no local model was started
    assert (private_home / "checkpoints.sqlite").is_file() is not bool(postgres)


@pytest.mark.e2e  # the real chat model
def test_a_run_checkpointed_in_postgres_with_the_real_model_is_traced_elsewhere(
    private_home: Path, postgres_url: str
) -> None:
    env = {"HOPRAG_POSTGRES_URL": postgres_url}
    thread = f"real-{uuid.uuid4().hex[:8]}"
    asked = cli("ask", QUESTION, "--system", "vanilla", "--thread", thread, home=private_home,
                env=env)  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    assert "farrengast" in asked.stdout.lower()
    traced = cli("trace", thread, home=private_home, env=env)
    assert traced.returncode == 0, traced.stderr
    assert "finished" in traced.stdout.splitlines()[0]
    assert "farrengast" in traced.stdout.lower()
    assert not (private_home / "checkpoints.sqlite").exists()
