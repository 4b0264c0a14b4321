"""A stand-in for a compiled `llama-server` that works: it takes the real one's arguments,
answers /health and writes one token for /completion, so that a build's smoke run passes
without compiling llama.cpp.

    python tests/fake_llama_server.py --model M --port N [any other llama-server option]
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def _reply(self, body: dict[str, object]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._reply({"status": "ok"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._reply({"content": " Ulden", "tokens_predicted": 1})

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    print(f"fake llama-server listening on {port}", flush=True)
    HTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
