"""A stand-in for a remote OpenAI-compatible model endpoint, on loopback: it answers every
chat completion with one fixed reply, or misbehaves as told (drops the connection
unanswered, or answers too late), and counts the requests it got."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Mode = Literal["ok", "drop", "slow"]


@dataclass
class FakeEndpoint:
    reply: str = "Odile Farrengast"
    mode: Mode = "ok"
    delay_s: float = 5.0  # how late "slow" answers
    drop_first: int = 0  # in "ok" mode, drop this many requests first
    requests: int = 0
    url: str = ""

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": self.reply},
            "finish_reason": "stop",
        }
        if body.get("logprobs"):
            top = [{"token": "yes", "logprob": -0.1}, {"token": "no", "logprob": -2.4}]
            choice["logprobs"] = {"content": [{**top[0], "bytes": None, "top_logprobs": top}]}
        return {
            "id": f"chatcmpl-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "remote"),
            "choices": [choice],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        }


def _handler(endpoint: FakeEndpoint, lock: threading.Lock) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with lock:
                endpoint.requests += 1
                dropping = endpoint.mode == "drop" or endpoint.requests <= endpoint.drop_first
            if dropping:  # close the connection without a word
                self.close_connection = True
                return
            if endpoint.mode == "slow":
                time.sleep(endpoint.delay_s)
            payload = json.dumps(endpoint.completion(body)).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:  # the client gave up waiting
                pass

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def fake_endpoint(
    kind: type[FakeEndpoint] = FakeEndpoint, **options: Any
) -> Iterator[FakeEndpoint]:
    """A running `FakeEndpoint` (or subclass `kind`); change its `mode` at any time."""
    endpoint = kind(**options)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(endpoint, threading.Lock()))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()
