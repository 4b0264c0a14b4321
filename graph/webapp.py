"""HTTP checks in front of LangGraph Server (langgraph.json `http.app`).

A run's input is written to its thread's checkpoint before any node runs, so a malformed
input (say `"messages": 5`) would fail inside the graph and leave a thread that can no
longer be read. This middleware refuses such requests before they reach the server:
bodies over `MAX_BODY_BYTES`, inputs and state updates whose fields have the wrong
types, `context` settings a request may not set, and index names that are not names.
The answer is a 4xx with one clear `detail` line; nothing is stored.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.checks import check_name
from app.errors import UserError
from app.settings import Settings

MAX_BODY_BYTES = 1 << 20
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


def check_input(values: Any, what: str, strict: bool = True) -> None:
    """A run's input (`strict`: only the input fields) or a state update's values."""
    if values is None:
        return
    if not isinstance(values, dict):
        raise UserError(f"{what} must be an object such as {{'question': '...'}}")
    unknown = set(values) - INPUT_FIELDS
    if strict and unknown:
        raise UserError(f"{what} has unknown field(s) {sorted(unknown)}; send question or messages")
    if not isinstance(values.get("question", ""), str):
        raise UserError(f"{what}.question must be a string")
    messages = values.get("messages", [])
    if not isinstance(messages, list):
        raise UserError(f"{what}.messages must be a list of messages")
    for i, message in enumerate(messages):
        _check_message(message, f"{what}.messages[{i}]")
    ids = values.get("gold_passage_ids", [])
    if not isinstance(ids, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in ids
    ):
        raise UserError(f"{what}.gold_passage_ids must be a list of integers")


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
    context = body.get("context")
    if context is not None:
        if not isinstance(context, dict):
            raise UserError("context must be an object of settings")
        Settings().with_request(context, strict=True)
    configurable = (
        (body.get("config") or {}).get("configurable")
        if isinstance(body.get("config"), dict)
        else None
    )
    if isinstance(configurable, dict) and "index" in configurable:
        index = configurable["index"]
        if not isinstance(index, str):
            raise UserError("config.configurable.index must be an index name")
        if not (Settings().indexes_dir / check_name(index) / "manifest.json").is_file():
            raise UserError(f"no index named {index!r} on this server")


def _refuse(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


class RequestCheck:
    """Pure ASGI middleware: buffers JSON bodies of writes, checks them, replays them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
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
        except UserError as exc:
            await _refuse(422, str(exc))(scope, receive, send)
            return
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


app = Starlette()
app.add_middleware(RequestCheck)
