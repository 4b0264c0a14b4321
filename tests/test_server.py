"""`hoprag serve` (what `make serve` runs): `langgraph dev` with every graph of
langgraph.json on a free loopback port, without --allow-blocking, driven through
`langgraph_sdk` as a chat client would."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import httpx
import psutil
import pytest
from langgraph_sdk import get_sync_client

from app.llm.engine import free_port
from graph.deft import HOP
from tests.conftest import DEMO_QUESTION, HOPRAG, ROOT, stored_data

pytestmark = pytest.mark.e2e  # the real chat model, servers or the installed CLI


def start_server(home: Path, index: str, log: Path, **env: str) -> tuple[subprocess.Popen, str]:
    """`hoprag serve` on a free port, once it answers /ok."""
    port = free_port()
    proc = subprocess.Popen(
        [HOPRAG, "serve"],
        cwd=ROOT,
        env={
            **os.environ,
            "HOPRAG_HOME": str(home),
            "HOPRAG_INDEX": index,
            "HOPRAG_PORT": str(port),
            **env,
        },
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"hoprag serve exited; see {log}"
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.5)
    stop_server(proc)
    raise AssertionError(f"hoprag serve did not answer in 180 s; see {log}")


def stop_server(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)


@pytest.fixture(scope="module")
def served(home: Path, sample_index: str, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    log = tmp_path_factory.mktemp("hoprag-serve") / "server.log"
    proc, url = start_server(home, sample_index, log)
    try:
        yield url, log
    finally:
        stop_server(proc)


@pytest.fixture(scope="module")
def server_url(served: tuple[str, Path]) -> str:
    return served[0]


def chat(client, thread_id: str, graph: str, text: str) -> tuple[list, dict]:
    """One chat turn, streamed with the steps of subgraphs (DeFT's hop), as Studio streams
    it: the `updates` and `custom` events (a subgraph's named `custom|hop:<task id>`,
    read here by their mode alone), and the final state."""
    events = [
        SimpleNamespace(event=e.event.split("|")[0], data=e.data)
        for e in client.runs.stream(
            thread_id,
            graph,
            input={"messages": [{"role": "user", "content": text}]},
            stream_mode=["updates", "custom"],
            stream_subgraphs=True,
        )
    ]
    return events, client.threads.get_state(thread_id)["values"]


def test_hoprag_serve_serves_every_graph_on_loopback(server_url: str) -> None:
    url = server_url
    client = get_sync_client(url=url)
    graphs = {a["graph_id"] for a in client.assistants.search(limit=50)}
    assert {"deft", "vanilla", "iterative", "closed_book", "chainrag"} <= graphs
    port = int(url.rsplit(":", 1)[1])
    bound = {
        c.laddr.ip
        for c in psutil.net_connections("tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    }
    assert bound == {"127.0.0.1"}  # what the server listens on, not the URL built here


def test_a_deft_chat_follow_up_is_made_self_contained_and_cites_sources(
    served: tuple[str, Path],
) -> None:
    url, log = served
    client = get_sync_client(url=url)
    thread = client.threads.create()["thread_id"]
    events, first = chat(client, thread, "deft", "Who founded Velloway Ironworks?")
    assert "farrengast" in first["answer"].lower()
    assert not first.get("contextualised_from"), "no history: the question is taken as asked"
    updates = [e.data for e in events if e.event == "updates"]
    assert "retrieve_question_passages" in {node for u in updates for node in u}
    decisions = [e.data["decision"] for e in events if e.event == "custom" and "decision" in e.data]
    assert decisions and {"p_yes", "threshold", "outcome"} <= set(decisions[0])

    events, second = chat(client, thread, "deft", "and where was she born?")
    assert second["contextualised_from"] == "and where was she born?"
    assert "farrengast" in second["question"].lower()
    assert "oskelund" in second["answer"].lower()
    reply = second["messages"][-1]
    assert reply["type"] == "ai" and [m["type"] for m in second["messages"]] == [
        "human",
        "ai",
        "human",
        "ai",
    ]
    cited = reply["additional_kwargs"]["citations"]
    assert {"id": 14, "title": "Odile Farrengast", "cite": "Odile Farrengast"} in cited
    assert "[14] Odile Farrengast" in reply["content"]
    # The second turn starts clean: its decisions are its own, not the first turn's too.
    streamed = [e for e in events if e.event == "custom" and "decision" in e.data]
    assert len(second["decisions"]) == len(streamed)
    assert "BlockingError" not in log.read_text(errors="replace")

    # The finished turn replays from the server's own threads, without loading a model.
    replay = subprocess.run(
        [HOPRAG, "trace", thread, "--url", url], capture_output=True, text=True, timeout=120
    )
    assert replay.returncode == 0, replay.stderr
    assert "deft" in replay.stdout and "finished" in replay.stdout
    assert "asked: and where was she born?" in replay.stdout
    assert "[contextualise_question]" in replay.stdout and "decision " in replay.stdout
    assert "cited: " in replay.stdout and "[14] Odile Farrengast" in replay.stdout


HOP_STEPS = ("write_sub_question", "retrieve_for_sub_question", "filter_relevant",
             "answer_sub_question", "update_qa_table")  # fmt: skip


def test_studio_draws_and_streams_every_step_of_the_hop(server_url: str) -> None:
    """What Studio shows of DeFT's hop subgraph: the graph drawn with xray holds the hop's
    own steps, and a two-hop turn streamed with subgraphs names each of them under the
    hop's namespace, with the decisions taken there; `hoprag trace --url` lists them too.
    Without the QA cache, so that no step is answered from another test's rows, and without
    the direct answer, which can read both hops at once."""
    client = get_sync_client(url=server_url)
    deft = client.assistants.search(graph_id="deft", limit=1)[0]["assistant_id"]
    drawn = {node["id"] for node in client.assistants.get_graph(deft, xray=True)["nodes"]}
    assert {f"{HOP}:{step}" for step in HOP_STEPS} <= drawn, sorted(drawn)

    thread = client.threads.create()["thread_id"]
    events = list(
        client.runs.stream(
            thread,
            "deft",
            input={"question": DEMO_QUESTION},
            context={"qa_cache": False, "direct_answer": False},
            stream_mode=["updates", "custom"],
            stream_subgraphs=True,
        )
    )
    in_hop = [e for e in events if e.event.split("|")[-1].startswith(f"{HOP}:")]
    assert set(HOP_STEPS) <= {
        node for e in in_hop if e.event.startswith("updates") for node in e.data
    }
    assert any(e.event.startswith("custom") and "decision" in e.data for e in in_hop)
    state = client.threads.get_state(thread)["values"]
    assert len(state["qa_table"]) >= 2 and "ulden" in state["answer"].lower()

    replay = subprocess.run(
        [HOPRAG, "trace", thread, "--url", server_url], capture_output=True, text=True, timeout=120
    )
    assert replay.returncode == 0, replay.stderr
    assert all(f"[{step}]" in replay.stdout for step in HOP_STEPS), replay.stdout


def test_a_chainrag_thread_runs_through_the_sdk(server_url: str) -> None:
    client = get_sync_client(url=server_url)
    thread = client.threads.create()
    final = client.runs.wait(
        thread["thread_id"], "chainrag", input={"question": "Who founded Tavistrom College?"}
    )
    assert final["plan"] and len(final["chain"]) == len(final["plan"])
    assert final["answer"] and final["messages"][-1]["type"] == "ai"
    assert [m["type"] for m in final["messages"]] == ["human", "ai"]


SINGLE_HOPS = {
    "Which company makes the Brannock kettle?": "velloway",
    "Who founded Velloway Ironworks?": "farrengast",
    "Which band recorded the album Salt and Cinder?": "pale ferrymen",
    "Who wrote the novel The Winter Lamplighter?": "quenby",
    "Who founded Tavistrom College?": "reyvald",
    "Which river flows through Brisk Hollow?": "ulden",
    "Which explorer first mapped Lake Sarnovel?": "haldstrom",
    "In what year was the Vollen Bridge built?": "1834",
}


def test_eight_concurrent_chats_all_finish_correctly(server_url: str) -> None:
    def ask(question: str) -> tuple[str, float]:
        client = get_sync_client(url=server_url)
        thread = client.threads.create()["thread_id"]
        start = time.monotonic()
        final = client.runs.wait(
            thread, "vanilla", input={"messages": [{"role": "user", "content": question}]}
        )
        return final["messages"][-1]["content"], time.monotonic() - start

    with ThreadPoolExecutor(len(SINGLE_HOPS)) as pool:
        replies = dict(zip(SINGLE_HOPS, pool.map(ask, SINGLE_HOPS), strict=True))
    for question, expected in SINGLE_HOPS.items():
        reply, _ = replies[question]
        assert expected in reply.lower(), (question, reply)
        assert "Sources: [" in reply


def malformed_requests(thread: str) -> list[tuple[str, str, object]]:
    """(method, path, JSON body or raw bytes) of requests no client should send."""
    runs = f"/threads/{thread}/runs/wait"
    ok_input = {"question": "Who founded Tavistrom College?"}
    bodies: list[object] = [
        b"",
        b"\x00\xff\xfe binary",
        b"{not json",
        [1, 2, 3],
        "just a string",
        {"assistant_id": 5, "input": ok_input},
        {"assistant_id": "no-such-graph", "input": ok_input},
        {"assistant_id": "vanilla", "input": "Who founded it?"},
        {"assistant_id": "vanilla", "input": ["Who?"]},
        {"assistant_id": "vanilla", "input": {"question": 42}},
        {"assistant_id": "vanilla", "input": {"question": None}},
        {"assistant_id": "vanilla", "input": {"question": {"nested": "x"}}},
        {"assistant_id": "vanilla", "input": {"messages": 5}},
        {"assistant_id": "vanilla", "input": {"messages": "hello"}},
        {"assistant_id": "vanilla", "input": {"messages": [5]}},
        {"assistant_id": "vanilla", "input": {"messages": [{"role": "wizard", "content": "x"}]}},
        {"assistant_id": "vanilla", "input": {"messages": [{"role": "user", "content": 7}]}},
        {"assistant_id": "vanilla", "input": {"messages": [{"role": "user"}]}},
        {"assistant_id": "vanilla", "input": {"gold_passage_ids": ["a"]}},
        {"assistant_id": "vanilla", "input": {"hop": 3, "question": "x"}},
        {"assistant_id": "vanilla", "input": {"question": "x" * 2_000_000}},
        {"assistant_id": "vanilla", "input": ok_input, "context": {"w": "ten"}},
        {"assistant_id": "vanilla", "input": ok_input, "context": {"top_k": True}},
        {"assistant_id": "vanilla", "input": ok_input, "context": {"home": "/"}},
        {"assistant_id": "vanilla", "input": ok_input, "context": {"llm_base_url": "http://x"}},
        {"assistant_id": "vanilla", "input": ok_input, "context": ["w", 3]},
        {"assistant_id": "vanilla", "input": ok_input, "config": {"configurable": {"index": 3}}},
        {
            "assistant_id": "vanilla",
            "input": ok_input,
            "config": {"configurable": {"index": "../../etc"}},
        },
        {"assistant_id": "vanilla", "input": ok_input, "config": {"configurable": {"index": "no"}}},
    ]
    requests: list[tuple[str, str, object]] = [("POST", runs, b) for b in bodies]
    requests += [
        ("POST", "/runs/wait", {"assistant_id": "vanilla", "input": {"messages": {"a": 1}}}),
        ("POST", f"/threads/{uuid.uuid4()}/runs/wait", {"assistant_id": "vanilla"}),
        ("POST", "/threads/not-a-uuid/runs/wait", {"assistant_id": "vanilla", "input": ok_input}),
        ("GET", f"/threads/{uuid.uuid4()}/state", None),
        ("GET", "/threads/not-a-uuid/state", None),
        ("POST", f"/threads/{thread}/state", {"values": {"messages": 5}}),
        ("POST", f"/threads/{thread}/state", {"values": "x"}),
        ("POST", "/runs/batch", [{"assistant_id": "vanilla", "input": {"question": 1}}]),
        ("POST", "/assistants", {"graph_id": "vanilla", "context": {"home": "/"}}),
        ("POST", "/assistants", {"graph_id": "no-such-graph"}),
        ("DELETE", f"/threads/{uuid.uuid4()}", None),
    ]
    return requests


def test_malformed_requests_get_clear_errors_and_change_nothing(
    server_url: str, home: Path
) -> None:
    client = get_sync_client(url=server_url)
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "vanilla", input={"question": ""})  # a turn with no LLM call
    history = [c["checkpoint_id"] for c in client.threads.get_history(thread, limit=100)]
    before = stored_data(home)
    requests = malformed_requests(thread)
    assert len(requests) >= 40
    with httpx.Client(base_url=server_url, timeout=60) as http:
        for method, path, body in requests:
            raw = body if isinstance(body, bytes) else None
            payload = None if raw is not None or body is None else body
            response = http.request(method, path, content=raw, json=payload)
            assert 400 <= response.status_code < 500, (path, body, response.text[:300])
            detail = response.json()["detail"]
            assert isinstance(detail, str) and detail and "Traceback" not in detail
            assert http.get("/ok").status_code == 200
    assert [c["checkpoint_id"] for c in client.threads.get_history(thread, limit=100)] == history
    assert client.threads.get_state(thread)["values"]["answer"] == "Please ask a question."
    assert stored_data(home) == before
