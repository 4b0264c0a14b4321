"""`hoprag serve` closed by default, against the real dev server: a page of an origin not
in HOPRAG_CORS_ORIGINS gets no CORS grant and starts nothing, endpoints the graphs do
not need are off (scheduled runs too), and a request out of range gets a 422 and stores
no run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

from app.settings import MAX_QUESTION_CHARS, MAX_THREAD_MESSAGES, STUDIO_ORIGIN
from tests.test_server import start_server, stop_server

pytestmark = pytest.mark.e2e  # the real chat model, servers or the installed CLI

FOREIGN = "https://evil.example"


@pytest.fixture(scope="module")
def server_url(home: Path, sample_index: str, tmp_path_factory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("hoprag-serve-closed") / "server.log"
    proc, url = start_server(home, sample_index, log, HOPRAG_CORS_ORIGINS=STUDIO_ORIGIN)
    try:
        yield url
    finally:
        stop_server(proc)


def test_a_page_of_another_origin_gets_no_cors_grant_and_starts_no_run(server_url: str) -> None:
    client = get_sync_client(url=server_url)
    thread = client.threads.create()["thread_id"]
    run = f"/threads/{thread}/runs/wait"
    body = '{"assistant_id": "vanilla", "input": {"question": ""}}'
    with httpx.Client(base_url=server_url, timeout=60) as http:
        preflight = http.options(
            run, headers={"origin": FOREIGN, "access-control-request-method": "POST"}
        )
        # text/plain skips the browser's preflight: only the server's own check stops it.
        simple = http.post(
            run, content=body, headers={"origin": FOREIGN, "content-type": "text/plain"}
        )
        read = http.get("/info", headers={"origin": FOREIGN})
        for response in (preflight, simple, read):
            assert response.status_code == 403, response.text
            assert "access-control-allow-origin" not in response.headers
        studio = http.options(
            run, headers={"origin": STUDIO_ORIGIN, "access-control-request-method": "POST"}
        )
        assert studio.headers["access-control-allow-origin"] == STUDIO_ORIGIN
    assert client.runs.list(thread) == []
    assert client.threads.get_history(thread) == []


def test_endpoints_the_graphs_do_not_need_are_off(server_url: str) -> None:
    with httpx.Client(base_url=server_url, timeout=60) as http:
        for path in ("/mcp", "/a2a/deft", "/store/items", "/store/namespaces", "/ui/deft"):
            assert http.post(path, json={}).status_code == 404, path
        assert http.get("/info").status_code == 200  # what the SDK and Studio read
    client = get_sync_client(url=server_url)
    thread = client.threads.create()["thread_id"]
    with httpx.Client(base_url=server_url, timeout=60) as http:
        for path, body in (
            ("/runs/crons", {"assistant_id": "deft", "schedule": "* * * * *"}),
            (f"/threads/{thread}/runs/crons", {"assistant_id": "deft", "schedule": "* * * * *"}),
            ("/runs/crons/search", {}),
        ):
            refused = http.post(path, json=body)
            assert refused.status_code == 403 and "crons" in refused.text, (path, refused.text)


def test_out_of_range_settings_give_one_422_line_and_store_no_run(server_url: str) -> None:
    client = get_sync_client(url=server_url)
    thread = client.threads.create()["thread_id"]
    turn = {"messages": [{"role": "user", "content": "Who founded Velloway Ironworks?"}]}
    cases = [
        ({"context": {"w": 1_000_000}}, "w=1000000 is out of range 1..50"),
        ({"context": {"max_steps": 1_000_000}}, "max_steps=1000000 is out of range 1..12"),
        ({"context": {"max_answer_tokens": 1_000_000}}, "is out of range 1..1024"),
        ({"context": {"top_k": 0}}, "top_k=0 is out of range 1..50"),
        ({"config": {"recursion_limit": 1000}}, "recursion_limit=1000 is out of range 1..200"),
        ({"input": {"question": "x" * (MAX_QUESTION_CHARS + 1)}}, f"at most {MAX_QUESTION_CHARS}"),
        (
            {"input": {"messages": turn["messages"] * (MAX_THREAD_MESSAGES + 1)}},
            f"at most {MAX_THREAD_MESSAGES}",
        ),
    ]
    with httpx.Client(base_url=server_url, timeout=60) as http:
        for change, message in cases:
            body = {"assistant_id": "deft", "input": turn, **change}
            response = http.post(f"/threads/{thread}/runs/wait", json=body)
            assert response.status_code == 422, (change, response.text)
            assert message in response.json()["detail"], (change, response.text)
    assert client.runs.list(thread) == []
    assert client.threads.get_history(thread) == []


def test_a_thread_takes_no_more_than_its_message_limit(server_url: str) -> None:
    client = get_sync_client(url=server_url)
    thread = client.threads.create()["thread_id"]
    # An empty last message is answered without the model: the thread then holds the
    # limit exactly (the messages sent and the reply).
    filler = [{"role": "user", "content": "hello"}] * (MAX_THREAD_MESSAGES - 2)
    sent = {"messages": [*filler, {"role": "user", "content": ""}]}
    final = client.runs.wait(thread, "vanilla", input=sent)
    assert len(final["messages"]) == MAX_THREAD_MESSAGES
    runs = client.runs.list(thread)
    with httpx.Client(base_url=server_url, timeout=60) as http:
        response = http.post(
            f"/threads/{thread}/runs/wait",
            json={"assistant_id": "vanilla", "input": {"question": "Who founded it?"}},
        )
    assert response.status_code == 422
    assert f"a thread holds at most {MAX_THREAD_MESSAGES}" in response.json()["detail"]
    assert client.runs.list(thread) == runs
