"""The server is closed by default and every request is held to its limits: browser pages
only from HOPRAG_CORS_ORIGINS, `hoprag serve` only on loopback without auth, settings,
recursion limit, question length and thread size in range, all refused before a run
exists (graph/webapp.py's middleware on a stand-in server, no model)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from typing_extensions import TypedDict

from app.cli import server as serve_cli
from app.errors import ServiceError, UserError
from app.llm.engine import free_port
from app.llm.gateway import LLMGateway
from app.settings import (
    MAX_QUESTION_CHARS,
    MAX_THREAD_MESSAGES,
    REQUEST_SETTINGS,
    STUDIO_ORIGIN,
    Settings,
)
from graph.webapp import OriginCheck, RequestCheck, check_request
from tests.conftest import ROOT

SERVER = "http://127.0.0.1:8123"
FOREIGN = "https://evil.example"


class StandIn:
    """The LangGraph server's routes that the checks meet: threads holding some
    messages, and run creation, which records what reached it."""

    def __init__(self) -> None:
        self.stored: dict[str, int] = {}
        self.runs: list[dict[str, Any]] = []

    async def thread(self, request: Request) -> JSONResponse:
        count = self.stored.get(request.path_params["tid"])
        if count is None:
            return JSONResponse({"detail": "not found"}, status_code=404)
        messages = [{"type": "human", "content": "hi"}] * count
        return JSONResponse(
            {"thread_id": request.path_params["tid"], "values": {"messages": messages}}
        )

    async def run(self, request: Request) -> JSONResponse:
        self.runs.append(await request.json())
        return JSONResponse({"run_id": str(uuid.uuid4())})

    async def info(self, request: Request) -> JSONResponse:
        return JSONResponse({"version": "stand-in"})

    def app(self) -> Starlette:
        app = Starlette(
            routes=[
                Route("/info", self.info),
                Route("/threads/{tid}", self.thread),
                Route("/threads/{tid}/runs", self.run, methods=["POST"]),
                Route("/threads/{tid}/runs/wait", self.run, methods=["POST"]),
                Route("/threads/{tid}/state", self.run, methods=["POST"]),
            ]
        )
        app.add_middleware(RequestCheck)
        app.add_middleware(OriginCheck)
        return app


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[StandIn, TestClient]]:
    monkeypatch.setenv("HOPRAG_CORS_ORIGINS", f"{STUDIO_ORIGIN}, http://localhost:3000/")
    stand_in = StandIn()
    # A loopback caller: without API tokens the server answers no other (graph/auth.py).
    with TestClient(stand_in.app(), base_url=SERVER, client=("127.0.0.1", 50000)) as client:
        yield stand_in, client


def test_pages_of_other_origins_get_a_403_and_no_cors_grant(
    server: tuple[StandIn, TestClient],
) -> None:
    stand_in, client = server
    thread = str(uuid.uuid4())
    run = f"/threads/{thread}/runs/wait"
    body = '{"assistant_id": "vanilla", "input": {"question": "Who founded it?"}}'
    # A text/plain POST is a "simple" request: a browser sends it without a preflight.
    for origin in (FOREIGN, "null", "http://127.0.0.1:9999", "http://rebound.example:8123"):
        headers = {"origin": origin, "content-type": "text/plain"}
        if origin == "http://rebound.example:8123":  # DNS rebinding: the Host matches
            headers["host"] = "rebound.example:8123"
        response = client.post(run, content=body, headers=headers)
        assert response.status_code == 403, (origin, response.text)
        assert "HOPRAG_CORS_ORIGINS" in response.json()["detail"]
        assert "access-control-allow-origin" not in response.headers
    preflight = client.options(
        run, headers={"origin": FOREIGN, "access-control-request-method": "POST"}
    )
    assert preflight.status_code == 403
    assert "access-control-allow-origin" not in preflight.headers
    read = client.get("/info", headers={"origin": FOREIGN})
    assert read.status_code == 403 and "access-control-allow-origin" not in read.headers
    assert stand_in.runs == []


def test_named_origins_get_cors_grants_and_clients_without_origin_pass(
    server: tuple[StandIn, TestClient],
) -> None:
    _, client = server
    preflight = client.options(
        "/info",
        headers={
            "origin": STUDIO_ORIGIN,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type",
            "access-control-request-private-network": "true",  # Chrome: Studio to loopback
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == STUDIO_ORIGIN
    assert preflight.headers["access-control-allow-private-network"] == "true"
    for origin in (STUDIO_ORIGIN, "http://localhost:3000"):  # given with a trailing slash
        read = client.get("/info", headers={"origin": origin})
        assert read.status_code == 200 and read.headers["access-control-allow-origin"] == origin
    assert client.get("/info").status_code == 200  # the SDK, curl: no Origin
    own = client.get("/info", headers={"origin": SERVER})  # the server's own /docs page
    assert own.status_code == 200 and "access-control-allow-origin" not in own.headers


def test_a_malformed_origin_setting_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("*", "smith.langchain.com", "https://smith.langchain.com/studio"):
        monkeypatch.setenv("HOPRAG_CORS_ORIGINS", bad)
        with pytest.raises(UserError, match="not an origin"):
            Settings()


OUT_OF_RANGE: list[tuple[dict[str, Any], str]] = [
    ({"context": {"w": 1_000_000}}, "w=1000000 is out of range 1..50"),
    ({"context": {"top_k": 0}}, "top_k=0 is out of range 1..50"),
    ({"context": {"max_steps": 1_000_000}}, "max_steps=1000000 is out of range 1..12"),
    ({"context": {"max_answer_tokens": 1_000_000}}, "out of range 1..1024"),
    ({"context": {"tau_rel": 1.5}}, "tau_rel=1.5 is out of range 0..1"),
    ({"config": {"recursion_limit": 1_000_000}}, "recursion_limit=1000000 is out of range 1..200"),
    ({"config": {"recursion_limit": 0}}, "out of range 1..200"),
    ({"config": {"recursion_limit": "25"}}, "out of range 1..200"),
    (
        {"input": {"question": "x" * (MAX_QUESTION_CHARS + 1)}},
        f"input.question has {MAX_QUESTION_CHARS + 1} characters; at most {MAX_QUESTION_CHARS}",
    ),
    (
        {"input": {"messages": [{"role": "user", "content": "x" * (MAX_QUESTION_CHARS + 1)}]}},
        f"at most {MAX_QUESTION_CHARS}",
    ),
    (
        {"input": {"messages": [{"role": "user", "content": "hi"}] * (MAX_THREAD_MESSAGES + 1)}},
        f"has {MAX_THREAD_MESSAGES + 1} messages; at most {MAX_THREAD_MESSAGES}",
    ),
]


def test_out_of_range_requests_get_one_422_line_naming_the_range_and_no_run(
    server: tuple[StandIn, TestClient],
) -> None:
    stand_in, client = server
    thread = str(uuid.uuid4())
    stand_in.stored[thread] = 0
    ok = {"assistant_id": "vanilla", "input": {"question": "Who founded Tavistrom College?"}}
    for change, message in OUT_OF_RANGE:
        response = client.post(f"/threads/{thread}/runs/wait", json={**ok, **change})
        assert response.status_code == 422, (change, response.text)
        detail = response.json()["detail"]
        assert message in detail and "\n" not in detail, (change, detail)
    assert stand_in.runs == []
    client.post(f"/threads/{thread}/runs/wait", json={**ok, "context": {"w": 50}})
    client.post(f"/threads/{thread}/runs/wait", json={**ok, "config": {"recursion_limit": 200}})
    assert len(stand_in.runs) == 2  # the ends of each range are in it


def test_a_thread_takes_no_more_than_its_message_limit(
    server: tuple[StandIn, TestClient],
) -> None:
    stand_in, client = server
    full, roomy = str(uuid.uuid4()), str(uuid.uuid4())
    stand_in.stored = {full: MAX_THREAD_MESSAGES - 1, roomy: 10}
    turn = {"messages": [{"role": "user", "content": "and where was she born?"}]}
    two = {"messages": turn["messages"] * 2}
    refused = client.post(f"/threads/{full}/runs/wait", json={"assistant_id": "deft", "input": two})
    assert refused.status_code == 422
    assert refused.json()["detail"] == (
        f"the thread holds {MAX_THREAD_MESSAGES - 1} messages and this adds 2; a thread holds "
        f"at most {MAX_THREAD_MESSAGES} (start a new thread)"
    )
    update = client.post(f"/threads/{full}/state", json={"values": two})
    assert update.status_code == 422
    assert stand_in.runs == []
    for thread, values in [(full, turn), (roomy, two), (full, None)]:
        response = client.post(
            f"/threads/{thread}/runs/wait", json={"assistant_id": "deft", "input": values}
        )
        assert response.status_code == 200, response.text
    assert len(stand_in.runs) == 3


def test_a_run_on_a_thread_the_caller_cannot_read_is_a_404_and_reaches_nothing(
    server: tuple[StandIn, TestClient],
) -> None:
    """Aegra checks a thread's owner when it is read, not when a run is added to it: the
    check asks the server for the thread with the caller's own headers first."""
    stand_in, client = server
    unknown = str(uuid.uuid4())  # another user's thread looks the same: the server says 404
    body = {"assistant_id": "deft", "input": {"question": "Who founded it?"}}
    for path in (f"/threads/{unknown}/runs", f"/threads/{unknown}/runs/wait"):
        response = client.post(path, json=body)
        assert response.status_code == 404, response.text
        assert response.json()["detail"] == f"no thread {unknown!r}"
    assert client.post(f"/threads/{unknown}/state", json={"values": {}}).status_code == 404
    assert stand_in.runs == []


def test_a_thread_made_with_its_state_is_held_to_the_same_checks() -> None:
    message = {"role": "user", "content": "hello"}
    half = {"updates": [{"values": {"messages": [message] * (MAX_THREAD_MESSAGES // 2 + 1)}}]}
    long = {"updates": [{"values": {"question": "x" * (MAX_QUESTION_CHARS + 1)}}]}
    for steps, detail in [
        ([half, half], f"a thread holds at most {MAX_THREAD_MESSAGES}"),
        ([long], f"at most {MAX_QUESTION_CHARS}"),
        ([{"updates": [{"values": {"messages": 5}}]}], "must be a list of messages"),
    ]:
        with pytest.raises(UserError, match=detail):
            check_request({"supersteps": steps})
    check_request({"supersteps": [half]})


def test_every_numeric_request_setting_has_a_range_that_holds_its_default() -> None:
    settings = Settings()
    for f in Settings.__dataclass_fields__.values():
        value = getattr(settings, f.name)
        if f.name not in REQUEST_SETTINGS or isinstance(value, bool | str):
            continue
        low, high = f.metadata["range"]
        assert low <= f.default <= high, f.name


def test_every_range_is_in_the_guide_settings_table() -> None:
    guide = (ROOT / "docs" / "guide.md").read_text()
    table = guide.split("## Settings", 1)[1].split("\n## ", 1)[0]
    for f in Settings.__dataclass_fields__.values():
        if "range" not in f.metadata:
            continue
        low, high = f.metadata["range"]
        row = next(line for line in table.splitlines() if f"`HOPRAG_{f.name.upper()}`" in line)
        assert f"{low:g}..{high:g}" in row, f.name
    assert f"{MAX_QUESTION_CHARS} characters" in table
    assert f"{MAX_THREAD_MESSAGES} messages" in table


def test_hoprag_serve_on_loopback_says_what_studio_needs(
    serve_execs: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """(An open interface without auth is refused: tests/test_auth.py.)"""
    monkeypatch.delenv("HOPRAG_CORS_ORIGINS", raising=False)
    monkeypatch.setenv("HOPRAG_HOST", "127.0.0.1")
    serve_cli.serve()
    assert serve_execs and serve_execs[0][serve_execs[0].index("--host") + 1] == "127.0.0.1"
    assert f"Studio needs HOPRAG_CORS_ORIGINS={STUDIO_ORIGIN}" in capsys.readouterr().err


def test_hoprag_serve_production_checks_its_database_and_index_before_it_starts(
    serve_execs: list[list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOPRAG_HOME", str(tmp_path))
    monkeypatch.setenv("HOPRAG_POSTGRES_URL", f"postgresql://x:secret@127.0.0.1:{free_port()}/db")
    with pytest.raises(ServiceError, match="does not answer") as refused:
        serve_cli.serve(production=True)
    assert "secret" not in refused.value.message
    monkeypatch.delenv("HOPRAG_POSTGRES_URL")
    monkeypatch.setenv("HOPRAG_INDEX", "nowhere")
    with pytest.raises(UserError, match="nowhere"):
        serve_cli.serve(production=True)
    assert serve_execs == []


class Answer(TypedDict):
    answer: str


def test_a_run_max_answer_tokens_reaches_the_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The answering nodes leave the cap to the gateway, which reads the run's context."""
    gateway = LLMGateway(Settings(max_answer_tokens=30))
    caps: list[int | None] = []

    def call(messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        caps.append(kwargs.get("max_tokens"))
        return AIMessage("Ulden River")

    monkeypatch.setattr(gateway, "_call", call)
    builder = StateGraph(Answer, context_schema=Settings)
    builder.add_node("answer", lambda state: {"answer": gateway.invoke([HumanMessage("Q?")])})
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    graph = builder.compile()
    graph.invoke({"answer": ""}, context={"max_answer_tokens": 7})  # as a server run gets it
    graph.invoke({"answer": ""}, context=Settings(max_answer_tokens=9))  # as `hoprag ask`
    graph.invoke({"answer": ""})
    gateway.invoke([HumanMessage("Q?")])  # outside a run: the eval's judge
    assert caps == [7, 9, 30, 30]
