"""`langgraph dev` serves the graphs of langgraph.json (Studio-style inspection): a real
server on a free loopback port, driven through `langgraph_sdk`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client

from app.llm import free_port
from tests.conftest import ROOT

LANGGRAPH = str(Path(sys.executable).with_name("langgraph"))


@pytest.fixture(scope="module")
def server_url(home: Path, sample_index: str, tmp_path_factory) -> Iterator[str]:
    port = free_port()
    log = (tmp_path_factory.mktemp("langgraph-dev") / "server.log").open("wb")
    env = {
        **os.environ,
        "HOPRAG_HOME": str(home),
        "HOPRAG_INDEX": sample_index,
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    }
    proc = subprocess.Popen(
        [
            LANGGRAPH,
            "dev",
            "--no-browser",
            "--no-reload",
            "--allow-blocking",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--config",
            str(ROOT / "langgraph.json"),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"langgraph dev exited; see {log.name}"
            try:
                with urllib.request.urlopen(f"{url}/ok", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()


def test_langgraph_dev_serves_every_graph(server_url: str) -> None:
    client = get_sync_client(url=server_url)
    graphs = {a["graph_id"] for a in client.assistants.search(limit=50)}
    assert {"deft", "vanilla", "iterative", "closed_book", "chainrag"} <= graphs


def test_a_deft_thread_runs_through_the_sdk(server_url: str) -> None:
    client = get_sync_client(url=server_url)
    thread = client.threads.create()
    final = client.runs.wait(
        thread["thread_id"],
        "deft",
        input={"messages": [{"role": "user", "content": "Who founded Tavistrom College?"}]},
    )
    assert final["question"] == "Who founded Tavistrom College?"
    assert final["answer"] and final["messages"][-1]["type"] == "ai"
    assert final["decisions"], "every run records its decisions"
    state = client.threads.get_state(thread["thread_id"])
    assert state["values"]["answer"] == final["answer"]


def test_a_chainrag_thread_runs_through_the_sdk(server_url: str) -> None:
    client = get_sync_client(url=server_url)
    thread = client.threads.create()
    final = client.runs.wait(
        thread["thread_id"], "chainrag", input={"question": "Who founded Tavistrom College?"}
    )
    assert final["plan"] and len(final["chain"]) == len(final["plan"])
    assert final["answer"] and final["messages"][-1]["type"] == "ai"
