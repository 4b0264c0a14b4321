"""HTTP checks in front of LangGraph Server (langgraph.json `http.app`).

A run's input is written to its thread's checkpoint before any node runs, so a malformed
input (say `"messages": 5`) would fail inside the graph and leave a thread that can no
longer be read. This middleware refuses such requests before they reach the server:
bodies over `MAX_BODY_BYTES`, inputs and state updates whose fields have the wrong
types or sizes (question length, messages in the thread), `context` settings a request
may not set or out of their range, a `config.recursion_limit` out of range, and index
names that are not names. The answer is a 4xx with one clear `detail` line; nothing is
stored. A caller the server's auth would refuse (graph/auth.py) gets its 401 before
these checks, which would otherwise tell a stranger which indexes there are.

In front of those, browser pages are let in only from HOPRAG_CORS_ORIGINS: the server's
own CORS grants none (langgraph.json `http.cors`), and a page of any other origin gets a
403, since CORS alone would still run a `text/plain` POST, which skips the preflight.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
from fastapi import FastAPI
from langgraph_sdk import Auth
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.checks import check_name
from app.errors import UserError
from app.settings import (
    EXPOSED_HEADERS,
    LOOPBACK_HOSTS,
    MAX_QUESTION_CHARS,
    MAX_THREAD_MESSAGES,
    RECURSION_LIMIT_RANGE,
    Settings,
)
from graph.auth import caller
from graph.replicas import heartbeat

MAX_BODY_BYTES = 1 << 20
# Writes that add messages to a stored thread: runs on it (which start a run) and state
# updates.
THREAD_WRITE = re.compile(r"/threads/(?P<thread>[^/]+)/(?P<what>runs(?:/stream|/wait)?|state)")
OFF_ROUTES = ("/store",)
ROLES = frozenset({"human", "user", "ai", "assistant", "system"})
INPUT_FIELDS = {"question", "messages", "gold_passage_ids"}


def _check_message(message: Any, where: str) -> None:
    if isinstance(message, str):
        return
    if not isinstance(message, dict):
        raise UserError(f"{where} must be an object with role and content, not {message!r:.40}")
    role = message.get("role", message.get("type"))
    if role not in ROLES:
        raise UserError(f"{where} has role {role!r:.40}; use one of {', '.join(sorted(ROLES))}")
    content = message.get("content")
    blocks = content if isinstance(content, list) else [content]
    for block in blocks:
        text = block.get("text", "") if isinstance(block, dict) else block
        if not isinstance(text, str):
            raise UserError(f"{where} content must be text, not {content!r:.40}")
        if role in ("human", "user") and len(text) > MAX_QUESTION_CHARS:
            raise UserError(f"{where} has {len(text)} characters; at most {MAX_QUESTION_CHARS}")


def check_input(values: Any, what: str, strict: bool = True) -> None:
    """A run's input (`strict`: only the input fields) or a state update's values."""
    if values is None:
        return
    if not isinstance(values, dict):
        raise UserError(f"{what} must be an object such as {{'question': '...'}}")
    unknown = set(values) - INPUT_FIELDS
    if strict and unknown:
        raise UserError(f"{what} has unknown field(s) {sorted(unknown)}; send question or messages")
    question = values.get("question", "")
    if not isinstance(question, str):
        raise UserError(f"{what}.question must be a string")
    if len(question) > MAX_QUESTION_CHARS:
        raise UserError(
            f"{what}.question has {len(question)} characters; at most {MAX_QUESTION_CHARS}"
        )
    messages = values.get("messages", [])
    if not isinstance(messages, list):
        raise UserError(f"{what}.messages must be a list of messages")
    if len(messages) > MAX_THREAD_MESSAGES:
        raise UserError(f"{what} has {len(messages)} messages; at most {MAX_THREAD_MESSAGES}")
    for i, message in enumerate(messages):
        _check_message(message, f"{what}.messages[{i}]")
    ids = values.get("gold_passage_ids", [])
    if not isinstance(ids, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in ids
    ):
        raise UserError(f"{what}.gold_passage_ids must be a list of integers")


def check_supersteps(steps: Any) -> None:
    """A thread created with its state written step by step (POST /threads) holds the
    same values, and as many messages, as runs could give it."""
    if not isinstance(steps, list):
        return  # the server's own schema check answers this one
    updates = [
        update
        for step in steps
        if isinstance(step, dict) and isinstance(step.get("updates"), list)
        for update in step["updates"]
        if isinstance(update, dict)
    ]
    added = 0
    for i, update in enumerate(updates):
        values = update.get("values")
        check_input(values, f"supersteps update {i} values", strict=False)
        added += len(values.get("messages") or []) if isinstance(values, dict) else 0
    if added > MAX_THREAD_MESSAGES:
        raise UserError(
            f"supersteps add {added} messages; a thread holds at most {MAX_THREAD_MESSAGES}"
        )


def check_request(body: Any) -> None:
    """Every part of a run, assistant or state-update request that reaches the graph."""
    if isinstance(body, list):  # /runs/batch
        for item in body:
            check_request(item)
        return
    if not isinstance(body, dict):
        return  # the server's own schema check answers this one
    check_input(body.get("input"), "input")
    check_input(body.get("values"), "values", strict=False)
    check_supersteps(body.get("supersteps"))
    context = body.get("context")
    if context is not None:
        if not isinstance(context, dict):
            raise UserError("context must be an object of settings")
        Settings().with_request(context, strict=True)
    config = body.get("config")
    config = config if isinstance(config, dict) else {}
    if "recursion_limit" in config:
        limit, (low, high) = config["recursion_limit"], RECURSION_LIMIT_RANGE
        if not isinstance(limit, int) or isinstance(limit, bool) or not low <= limit <= high:
            raise UserError(f"config.recursion_limit={limit!r:.40} is out of range {low}..{high}")
    configurable = config.get("configurable")
    if isinstance(configurable, dict) and "index" in configurable:
        index = configurable["index"]
        if not isinstance(index, str):
            raise UserError("config.configurable.index must be an index name")
        settings = Settings()
        if settings.production and index != settings.index:
            raise UserError(f"this server answers on index {settings.index!r} only")
        if not (settings.indexes_dir / check_name(index) / "manifest.json").is_file():
            raise UserError(f"no index named {index!r} on this server")


async def check_thread_write(scope: Scope, body: Any) -> None:
    """A run or state update goes to a thread the caller may read (Aegra checks the owner
    of a thread when it is read, not when a run is added to it), and may not take it past
    `MAX_THREAD_MESSAGES`."""
    write = THREAD_WRITE.fullmatch(scope["path"])
    if write is None:
        return
    thread = write["thread"]
    stored = await thread_messages(scope, thread)
    if stored is None:
        raise Auth.exceptions.HTTPException(404, f"no thread {thread[:40]!r}")
    values = (body.get("input") or body.get("values")) if isinstance(body, dict) else None
    if not isinstance(values, dict):
        return
    added = len(values.get("messages") or []) or int(bool(values.get("question")))
    if added and stored + added > MAX_THREAD_MESSAGES:
        raise UserError(
            f"the thread holds {stored} messages and this adds {added}; a thread holds at "
            f"most {MAX_THREAD_MESSAGES}",
            hint="start a new thread",
        )


async def thread_messages(scope: Scope, thread_id: str) -> int | None:
    """How many messages a thread holds, read from the server itself with the request's
    own headers, so that its auth decides what the request may see; None: no thread
    the request may see."""
    headers = [
        (name, value)
        for name, value in Headers(scope=scope).items()
        if name not in ("host", "origin", "content-length", "content-type")
    ]
    transport = httpx.ASGITransport(app=scope["app"])
    async with httpx.AsyncClient(transport=transport, base_url="http://hoprag") as client:
        response = await client.get(f"/threads/{thread_id}", headers=headers)
    if response.status_code == 404:
        return None
    values = response.json().get("values") if response.status_code == 200 else None
    messages = values.get("messages") if isinstance(values, dict) else None
    return len(messages) if isinstance(messages, list) else 0


def _own_loopback_origin(scope: Scope, origin: str) -> bool:
    """A page the server itself serves on a loopback address (its /docs): not a host name
    that merely points there, which is how a rebinding page would look."""
    host = Headers(scope=scope).get("host", "")
    return origin == f"http://{host}" and urlsplit(origin).hostname in LOOPBACK_HOSTS


class OriginCheck:
    """Pure ASGI middleware: a browser page (a request with an `Origin`) may call the
    server only from HOPRAG_CORS_ORIGINS, which get CORS grants, or from the server's own
    loopback address; any other origin gets a 403 and no grant."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.origins = Settings().allowed_origins
        self.cors = CORSMiddleware(
            app,
            allow_origins=sorted(self.origins),
            allow_methods=["*"],
            allow_headers=["*"],
            allow_credentials=True,
            allow_private_network=True,  # Chrome asks before a public page calls loopback
            expose_headers=EXPOSED_HEADERS,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = Headers(scope=scope).get("origin") if scope["type"] == "http" else None
        if origin is None or _own_loopback_origin(scope, origin):
            await self.app(scope, receive, send)
        elif origin in self.origins:
            await self.cors(scope, receive, send)
        else:
            detail = (
                f"pages of origin {origin[:80]!r} may not call this server "
                "(HOPRAG_CORS_ORIGINS names those that may)"
            )
            await _refuse(403, detail)(scope, receive, send)


def _refuse(status: int, detail: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


class RequestCheck:
    """Pure ASGI middleware: buffers JSON bodies of writes, checks them, replays them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        try:  # the server's auth comes after this middleware: a stranger learns nothing here
            caller(dict(scope["headers"]), scope.get("client"))
        except Auth.exceptions.HTTPException as exc:
            await _refuse(exc.status_code, exc.detail, exc.headers)(scope, receive, send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                limit = f"{MAX_BODY_BYTES // 1024} KiB"
                await _refuse(413, f"request body over {limit}")(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            parsed = json.loads(body) if body else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            parsed = None  # not JSON: the server's own parser answers
        try:
            await asyncio.to_thread(check_request, parsed)  # it looks at index folders
            await check_thread_write(scope, parsed)
        except UserError as exc:
            await _refuse(422, str(exc))(scope, receive, send)
            return
        except Auth.exceptions.HTTPException as exc:
            await _refuse(exc.status_code, exc.detail)(scope, receive, send)
            return
        replica = getattr(scope["app"].state, "replica", None)
        write = THREAD_WRITE.fullmatch(scope["path"])
        if replica is not None and write is not None and write["what"] != "state":
            await asyncio.to_thread(replica.requested, write["thread"])
        await self.app(scope, _replay(body, receive), send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The buffered body once, then the client's own messages (a later disconnect is
    how the server learns to cancel a streaming run)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


class RoutesOff:
    """Pure ASGI middleware: the store's routes, which no graph uses, answer 404 (LangGraph
    Server turns them off by langgraph.json; Aegra has no such switch)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(OFF_ROUTES):
            await _refuse(404, "the store is off on this server")(scope, receive, send)
            return
        await self.app(scope, receive, send)


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """On the production server, this replica's heartbeat and sweep (graph/replicas.py);
    `langgraph dev` keeps its runs in its own process and needs neither."""
    settings = Settings()
    if not (settings.production and settings.postgres_url):
        yield
        return
    async with heartbeat(settings.postgres_url) as replica:
        app.state.replica = replica
        yield


# A FastAPI app, as Aegra requires of `http.app` (LangGraph Server takes any Starlette
# one); no docs of its own: each server serves its API's.
app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
app.add_middleware(RequestCheck)
app.add_middleware(RoutesOff)
app.add_middleware(OriginCheck)  # the outer one: a foreign page is refused before all else
