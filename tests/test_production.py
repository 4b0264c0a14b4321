"""The production server, `hoprag serve --production` (Aegra on PostgreSQL), with the
README's client: any replica serves any thread, and a thread outlives a replica killed
in the middle of its run and a restart. The 401, 422 and CORS checks run against it too
(another user's thread: tests/test_server_checks.py, on both servers' request check).

Two replicas share one database and one model endpoint (`hoprag llm serve`), as a
deployment would; the chat model is the real one, on the sample index."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from app.postgres import cluster_folder
from app.settings import HEARTBEAT_S, REPLICA_LOST_S
from bench.services import Server, hoprag_env, hoprag_server, model_endpoint, new_database
from graph.replicas import LOST_RUN
from tests.conftest import DEMO_QUESTION

pytestmark = pytest.mark.e2e

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"
ANSWER = "Ulden"
FOREIGN = "https://evil.example"


@pytest.fixture(scope="module")
def database(postgres_url: str) -> str:
    """A database of its own on the session's PostgreSQL server."""
    return new_database(postgres_url, f"production_{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="module")
def model_url(home: Path) -> Iterator[str]:
    with model_endpoint(home) as url:
        yield url


def replica(
    home: Path, index: str, database: str, model_url: str, logs: Path
) -> AbstractContextManager[Server]:
    """One `hoprag serve --production` on a free port, once /health answers."""
    env = {
        "HOPRAG_INDEX": index,
        "HOPRAG_POSTGRES_URL": database,
        "HOPRAG_LLM_BASE_URL": model_url,
        "HOPRAG_API_TOKENS": f"alice:{ALICE},bob:{BOB}",
        "HOPRAG_QA_CACHE": "off",  # each run its full length, so that a kill lands mid-run
    }
    return hoprag_server(home, env, logs, production=True)


def client(url: str) -> SyncLangGraphClient:
    return get_sync_client(url=url, headers={"Authorization": f"Bearer {ALICE}"})


def ask(url: str, thread: str, question: str) -> list[str]:
    """The README's client: one turn streamed with updates and custom events; the kinds
    of event seen."""
    events = []
    for part in client(url).runs.stream(
        thread,
        "deft",
        stream_mode=["updates", "custom"],
        input={"messages": [{"role": "user", "content": question}]},
    ):
        assert part.event != "error", part.data
        events.append(part.event)
    return events


def last_reply(url: str, thread: str) -> str:
    return client(url).threads.get_state(thread)["values"]["messages"][-1]["content"]


@pytest.fixture(scope="module")
def pair(
    home: Path,
    sample_index: str,
    database: str,
    model_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Server, Server]]:
    """Two replicas on one database and one model endpoint, started once for the module;
    the last test kills the first."""
    logs = tmp_path_factory.mktemp("hoprag-production")
    with (
        replica(home, sample_index, database, model_url, logs) as a,
        replica(home, sample_index, database, model_url, logs) as b,
    ):
        yield a, b


def test_strangers_out_of_range_settings_and_foreign_pages_are_refused(
    pair: tuple[Server, Server],
) -> None:
    url = pair[0].url
    alice = {"Authorization": f"Bearer {ALICE}"}
    with httpx.Client(base_url=url, headers=alice, timeout=60) as http:
        assert http.post("/threads", json={}, headers={"Authorization": ""}).status_code == 401
        thread = http.post("/threads", json={}).json()["thread_id"]
        run = {"assistant_id": "deft", "input": {"question": DEMO_QUESTION}}
        for change, detail in [
            ({"context": {"max_steps": 1000}}, "max_steps=1000 is out of range 1..12"),
            ({"config": {"recursion_limit": 10**6}}, "out of range 1..200"),
            ({"config": {"configurable": {"index": "other"}}}, "index 'sample' only"),
        ]:
            response = http.post(f"/threads/{thread}/runs", json={**run, **change})
            assert response.status_code == 422, response.text
            assert detail in response.json()["detail"]
        assert http.get(f"/threads/{thread}/runs").json() == []
        page = http.post("/threads", json={}, headers={"Origin": FOREIGN})
        assert page.status_code == 403 and "access-control-allow-origin" not in page.headers
        preflight = http.options(
            "/threads", headers={"Origin": FOREIGN, "Access-Control-Request-Method": "POST"}
        )
        assert "access-control-allow-origin" not in preflight.headers
        assert http.post("/store/items/search", json={}).status_code == 404
        searched = http.post("/threads/search", json={}).json()
        assert thread in {t["thread_id"] for t in searched}
        # Another user's token: the thread is not there for it, and no run reaches it.
        bob = {"Authorization": f"Bearer {BOB}"}
        for path in (f"/threads/{thread}", f"/threads/{thread}/state"):
            assert http.get(path, headers=bob).status_code == 404
        history = http.post(f"/threads/{thread}/history", json={}, headers=bob)
        assert history.status_code == 404
        for path in (f"/threads/{thread}/runs", f"/threads/{thread}/runs/wait"):
            assert http.post(path, json=run, headers=bob).status_code == 404
        assert (
            http.post(f"/threads/{thread}/state", json={"values": {}}, headers=bob).status_code
            == 404
        )
        assert http.get(f"/threads/{thread}/runs", headers=bob).json() == []
        assert thread not in {
            t["thread_id"] for t in http.post("/threads/search", json={}, headers=bob).json()
        }
        assert http.get(f"/threads/{thread}/runs").json() == []  # nothing ran on it


def test_any_replica_serves_a_thread_and_its_follow_up(pair: tuple[Server, Server]) -> None:
    url_a, url_b = pair[0].url, pair[1].url
    thread = client(url_a).threads.create()["thread_id"]
    events = ask(url_a, thread, DEMO_QUESTION)
    assert {"updates", "custom"} <= set(events)  # the decisions stream as custom events
    assert ANSWER in last_reply(url_b, thread)  # read back on the other replica
    ask(url_b, thread, "Who founded it?")  # a follow-up turn there
    messages = client(url_a).threads.get_state(thread)["values"]["messages"]
    assert len(messages) == 4 and "Sources:" in messages[-1]["content"]


def test_a_replica_killed_mid_run_loses_no_thread_and_a_restarted_one_serves_it(
    pair: tuple[Server, Server],
    home: Path,
    sample_index: str,
    database: str,
    model_url: str,
    tmp_path: Path,
) -> None:
    url_a, url_b = pair[0].url, pair[1].url
    thread = client(url_a).threads.create()["thread_id"]
    started = threading.Event()

    def stream_on_a() -> None:
        try:
            for part in client(url_a).runs.stream(
                thread,
                "deft",
                stream_mode=["updates"],
                input={"messages": [{"role": "user", "content": DEMO_QUESTION}]},
            ):
                if part.event == "updates":
                    started.set()
        except (httpx.HTTPError, OSError):
            pass  # its server is killed under it

    streaming = threading.Thread(target=stream_on_a, daemon=True)
    streaming.start()
    assert started.wait(120), "the run on replica A never streamed a step"
    pair[0].kill()  # SIGKILL to its whole process group

    other = client(url_b)
    assert other.threads.get(thread)["thread_id"] == thread  # readable from B
    # Each step is saved before the next starts: at least the run's input is there.
    assert other.threads.get_history(thread, limit=100), "A's saved steps are lost"
    # B marks the run failed once A has missed its heartbeats, saying how to go on.
    [run] = other.runs.list(thread)
    deadline = time.monotonic() + REPLICA_LOST_S + 6 * HEARTBEAT_S
    while run["status"] == "running" and time.monotonic() < deadline:
        time.sleep(HEARTBEAT_S)
        run = other.runs.get(thread, run["run_id"])
    assert run["status"] == "error", run
    assert "hoprag resume" in run.get("error_message", LOST_RUN)
    # `hoprag resume` continues it from its last saved step.
    env = hoprag_env(
        home, HOPRAG_INDEX=sample_index, HOPRAG_POSTGRES_URL=database,
        HOPRAG_LLM_BASE_URL=model_url, HOPRAG_QA_CACHE="off",
    )  # fmt: skip
    resumed = subprocess.run(
        [sys.executable, "-m", "app.cli", "resume", thread, "--json"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert ANSWER in json.loads(resumed.stdout)["answer"]
    # A replica started again in A's place (a restart) serves the finished thread.
    with replica(home, sample_index, database, model_url, tmp_path) as restarted:
        messages = client(restarted.url).threads.get_state(thread)["values"]["messages"]
        assert [m["type"] for m in messages] == ["human", "ai"]
        assert ANSWER in messages[-1]["content"]


def test_without_a_database_it_keeps_a_cluster_of_its_own_across_restarts(
    home: Path, sample_index: str, tmp_path: Path
) -> None:
    """A new user's one machine: no HOPRAG_POSTGRES_URL, so the server starts PostgreSQL
    itself in a folder it keeps, and stops it when the server is stopped (SIGTERM)."""
    own_home = tmp_path / "home"
    (own_home / "indexes").mkdir(parents=True)
    for entry in (home / "indexes").iterdir():  # the session's sample index, linked
        (own_home / "indexes" / entry.name).symlink_to(entry)
    (own_home / "models").symlink_to(home / "models")
    folder = cluster_folder(own_home)
    # No database named: "" is the setting's default, whatever this process has.
    env = {"HOPRAG_INDEX": sample_index, "HOPRAG_API_TOKENS": f"alice:{ALICE}",
           "HOPRAG_POSTGRES_URL": ""}  # fmt: skip
    try:
        with hoprag_server(own_home, env, tmp_path, production=True) as server:
            thread = client(server.url).threads.create(metadata={"note": "kept"})["thread_id"]
        assert not list(folder.glob("data/postmaster.pid"))  # stopped with the server
        with hoprag_server(own_home, env, tmp_path, production=True) as server:
            assert client(server.url).threads.get(thread)["metadata"]["note"] == "kept"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
