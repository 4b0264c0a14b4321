"""API tokens and thread ownership (app/tokens.py, graph/auth.py): tokens from a private
file or the environment, a 401 without a valid one, a user's threads invisible to every
other user, `hoprag serve` on an open interface only with tokens. The fast tests check
the parts; the e2e ones drive the real dev server through `langgraph_sdk`."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from langgraph_sdk import Auth, get_sync_client
from langgraph_sdk.errors import PermissionDeniedError

from app.cli import server
from app.errors import UserError
from app.settings import MIN_TOKEN_CHARS, OWNER_KEY, Settings
from app.tokens import load_tokens, parse_tokens, user_of
from graph import auth
from tests.conftest import ROOT

ALICE = "alice-token-0123456789"
BOB = "bob-token-9876543210xyz"
TURN = {"messages": [{"role": "user", "content": ""}]}  # answered without the model


def test_tokens_are_read_with_their_user_names() -> None:
    entries = ["# the team", "", f"alice:{ALICE}", f"  {BOB}  "]
    tokens = parse_tokens(entries, "tokens")
    assert tokens[ALICE] == "alice"
    assert tokens[BOB].startswith("token-") and BOB not in tokens[BOB]
    assert user_of(tokens, ALICE) == "alice"
    assert user_of(tokens, ALICE[:-1]) is None


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["alice:short"], f"at least {MIN_TOKEN_CHARS} characters"),
        ([f"alice:{ALICE} x"], "without spaces"),
        ([f"al ice:{ALICE}"], "is not a name"),
        ([f"alice:{ALICE}", f"alice:{BOB}"], "entry 2: user alice or its token appears twice"),
        ([f"alice:{ALICE}", f"bob:{ALICE}"], "appears twice"),
    ],
)
def test_a_malformed_token_entry_is_one_clear_error(entries: list[str], message: str) -> None:
    with pytest.raises(UserError, match=message) as raised:
        parse_tokens(entries, "tokens")
    assert ALICE not in str(raised.value) and BOB not in str(raised.value)


def test_the_tokens_file_is_private_and_outside_the_repository(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"alice:{ALICE}\n")
    path.chmod(0o644)
    with pytest.raises(UserError, match="is open to other users"):
        load_tokens(Settings(api_tokens_file=path))
    path.chmod(0o600)
    both = load_tokens(Settings(api_tokens_file=path, api_tokens=f"bob:{BOB}"))
    assert both == {ALICE: "alice", BOB: "bob"}
    with pytest.raises(UserError, match="appears twice"):
        load_tokens(Settings(api_tokens_file=path, api_tokens=f"alice:{BOB}"))
    with pytest.raises(UserError, match="cannot read"):
        load_tokens(Settings(api_tokens_file=tmp_path / "missing"))
    with pytest.raises(UserError, match="not a full path"):
        load_tokens(Settings(api_tokens_file=Path("tokens")))
    with pytest.raises(UserError, match="inside the repository"):
        load_tokens(Settings(api_tokens_file=ROOT / "tokens"))
    assert load_tokens(Settings(api_tokens="")) == {}
    assert ALICE not in repr(Settings(api_tokens=ALICE))


def test_a_request_is_let_in_by_a_token_and_without_tokens_from_loopback_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local, remote = ("127.0.0.1", 5000), ("203.0.113.7", 5000)
    monkeypatch.setattr(auth, "TOKENS", {})
    assert auth.caller({}, local) == auth.LOCAL_USER
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        auth.caller({}, remote)
    assert refused.value.status_code == 403

    monkeypatch.setattr(auth, "TOKENS", {ALICE: "alice"})
    assert auth.caller({b"authorization": f"Bearer {ALICE}".encode()}, remote) == "alice"
    assert auth.caller({b"x-api-key": ALICE.encode()}, remote) == "alice"
    for headers in ({}, {b"authorization": f"Bearer {BOB}".encode()}, {b"x-api-key": b""}):
        with pytest.raises(Auth.exceptions.HTTPException) as refused:
            auth.caller(headers, local)
        assert refused.value.status_code == 401


def test_a_thread_is_stamped_with_its_maker_and_filtered_by_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def context(resource: str, action: str) -> Auth.types.AuthContext:
        user = SimpleNamespace(identity="alice", permissions=[], is_authenticated=True)
        return Auth.types.AuthContext(user=user, permissions=[], resource=resource, action=action)

    monkeypatch.setattr(auth, "TOKENS", {ALICE: "alice"})
    metadata = {OWNER_KEY: "bob", "topic": "x"}  # the server stores this very dict
    stamped = asyncio.run(auth.owner_only(context("threads", "create"), {"metadata": metadata}))
    assert stamped == {OWNER_KEY: "alice"}
    assert metadata == {OWNER_KEY: "alice", "topic": "x"}
    value = {"thread_id": "t", "metadata": None}
    asyncio.run(auth.owner_only(context("threads", "create_run"), value))
    assert value["metadata"] == {OWNER_KEY: "alice"}
    assert asyncio.run(auth.shared_assistants(context("assistants", "search"), {})) is None
    with pytest.raises(Auth.exceptions.HTTPException, match=r"graphs of langgraph\.json"):
        asyncio.run(auth.shared_assistants(context("assistants", "create"), {}))

    monkeypatch.setattr(auth, "TOKENS", {})
    value = {"metadata": {}}
    assert asyncio.run(auth.owner_only(context("threads", "create"), value)) is None
    assert value == {"metadata": {}}


def test_hoprag_serve_opens_an_interface_only_with_tokens(
    serve_execs: list[list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("HOPRAG_API_TOKENS_FILE", raising=False)
    monkeypatch.setenv("HOPRAG_HOST", "0.0.0.0")
    monkeypatch.setenv("HOPRAG_API_TOKENS", "")
    with pytest.raises(UserError, match=r"serving on 0\.0\.0\.0 without auth is refused"):
        server.serve()
    monkeypatch.setenv("HOPRAG_API_TOKENS", "alice:short")
    with pytest.raises(UserError, match="at least"):
        server.serve()
    assert serve_execs == []
    path = tmp_path / "tokens"
    path.write_text(f"alice:{ALICE}\n")
    path.chmod(0o600)
    monkeypatch.setenv("HOPRAG_API_TOKENS", "")
    monkeypatch.setenv("HOPRAG_API_TOKENS_FILE", str(path))
    server.serve()
    assert serve_execs and serve_execs[0][serve_execs[0].index("--host") + 1] == "0.0.0.0"


# --- the real dev server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def server_url(home: Path, sample_index: str, tmp_path_factory) -> Iterator[str]:
    from tests.test_server import start_server, stop_server

    log = tmp_path_factory.mktemp("hoprag-serve-auth") / "server.log"
    tokens = f"alice:{ALICE},bob:{BOB}"
    proc, url = start_server(home, sample_index, log, HOPRAG_API_TOKENS=tokens)
    try:
        yield url
    finally:
        stop_server(proc)


@pytest.mark.e2e
def test_a_request_without_a_valid_token_gets_401(server_url: str) -> None:
    with httpx.Client(base_url=server_url, timeout=60) as http:
        for headers in (
            {},
            {"authorization": f"Bearer {ALICE}x"},
            {"x-api-key": "nope"},
            {"x-auth-scheme": "langsmith"},  # Studio's sign-in, which `langgraph dev` trusts
        ):
            for response in (
                http.post("/threads", json={}, headers=headers),
                http.post("/threads/search", json={}, headers=headers),
                http.get(f"/threads/{uuid.uuid4()}/history", headers=headers),
                # refused before the request checks, whose 422 would tell about the server
                http.post(
                    "/runs/wait",
                    json={"assistant_id": "deft", "context": {"w": 0}},
                    headers=headers,
                ),
            ):
                assert response.status_code == 401, (headers, response.text)
                assert "token" in response.json()["detail"]
        checked = http.post(
            "/runs/wait",
            json={"assistant_id": "deft", "context": {"w": 0}},
            headers={"authorization": f"Bearer {ALICE}"},
        )
        assert checked.status_code == 422, checked.text  # a user's request is checked as ever
        assert "w=0 is out of range" in checked.json()["detail"]
        assert http.get("/ok").status_code == 200  # health checks stay open


@pytest.mark.e2e
def test_a_users_thread_is_invisible_to_every_other_user(server_url: str) -> None:
    alice = get_sync_client(url=server_url, headers={"Authorization": f"Bearer {ALICE}"})
    bob = get_sync_client(url=server_url, api_key=BOB)  # sent as x-api-key
    thread = alice.threads.create(metadata={OWNER_KEY: "bob"})["thread_id"]
    parts = list(
        alice.runs.stream(thread, "vanilla", input=TURN, stream_mode=["updates", "custom"])
    )
    assert parts and parts[-1].event != "error", parts[-1]
    [run] = alice.runs.list(thread)

    assert alice.threads.get(thread)["metadata"][OWNER_KEY] == "alice"
    assert thread in {t["thread_id"] for t in alice.threads.search(limit=100)}
    assert alice.threads.get_history(thread)
    assert thread not in {t["thread_id"] for t in bob.threads.search(limit=100)}
    refused = {
        "get": lambda: bob.threads.get(thread),
        "runs": lambda: bob.runs.list(thread),
        "state": lambda: bob.threads.get_state(thread),
        "history": lambda: bob.threads.get_history(thread),
        "metadata": lambda: bob.threads.update(thread, metadata={"x": 1}),
        "update_state": lambda: bob.threads.update_state(thread, {"question": "mine?"}),
        "run": lambda: bob.runs.get(thread, run["run_id"]),
        "join": lambda: bob.runs.join(thread, run["run_id"]),
        "stream": lambda: list(bob.runs.stream(thread, "vanilla", input=TURN)),
        "resume": lambda: bob.runs.wait(thread, "vanilla", input=None),
        "wait": lambda: bob.runs.wait(thread, "vanilla", input=TURN),
        "delete": lambda: bob.threads.delete(thread),
    }
    let_through = []
    for name, call in refused.items():
        try:
            call()
        except httpx.HTTPStatusError as exc:  # join_stream's is untyped
            if exc.response.status_code == 404:
                continue
        let_through.append(name)
    assert let_through == []
    # A stream that is joined has started (200) before the server looks: it ends at once.
    for joined in (bob.runs.join_stream(thread, run["run_id"]), bob.threads.join_stream(thread)):
        [part] = list(joined)
        assert part.event == "error" and "404" in part.data["message"], part
    assert len(alice.runs.list(thread)) == 1
    assert alice.threads.get_state(thread)["values"]["messages"]

    follow_up = alice.runs.wait(thread, "vanilla", input=TURN)
    assert len(follow_up["messages"]) == 4  # a second turn on her own thread
    with pytest.raises(PermissionDeniedError):
        bob.assistants.create("vanilla", config={"configurable": {"index": "sample"}})
    assert {a["graph_id"] for a in bob.assistants.search(limit=50)} >= {"deft", "vanilla"}
