"""The LLM gateway: every chat call of hoprag goes through one `ChatOpenAI`.

With ``HOPRAG_LLM_BASE_URL`` set, that endpoint is used (OpenAI, vLLM, Ollama, any
OpenAI-compatible server). Otherwise llama.cpp's `llama-server` (app/llm/engine.py) is
started on a free loopback port with the provisioned GGUF, reused for the whole process,
restarted once if it dies, and stopped at exit. A callback meters calls, tokens, prompt
tokens reused from the server's cache, and seconds; `p_yes` reads the yes/no token
probabilities of the zero-shot decisions and the LLM judge.
"""

from __future__ import annotations

import atexit
import math
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import openai
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import LLMResult
from langchain_openai import ChatOpenAI
from langgraph.runtime import get_runtime

from app.errors import ServiceError
from app.llm.engine import (
    REBUILD_HINT,
    exit_reason,
    free_port,
    log_tail,
    require_engine,
    stop_process,
    wait_healthy,
)
from app.llm.models import require_model
from app.settings import (
    SERVER_CACHE_REUSE_TOKENS,
    SERVER_START_TIMEOUT_S,
    Settings,
)

YES_TOKENS = frozenset({"yes", "y", "true"})
NO_TOKENS = frozenset({"no", "n", "false"})


@dataclass
class CallRecord:
    input_tokens: int
    output_tokens: int
    seconds: float
    cached_tokens: int = 0  # of the input, reused from the server's prompt cache


def _cached_tokens(usage: dict[str, Any], meta: dict[str, Any]) -> int:
    """Prompt tokens the endpoint did not have to read (OpenAI's and llama.cpp's
    `prompt_tokens_details.cached_tokens`; LangChain's `cache_read`)."""
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens")
    if cached is None:
        cached = (meta.get("input_token_details") or {}).get("cache_read")
    return int(cached or 0)


@dataclass
class UsageMeter(BaseCallbackHandler):
    """Counts chat calls, tokens and wall seconds; safe across threads."""

    calls: list[CallRecord] = field(default_factory=list)
    errors: int = 0
    _started: dict[UUID, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        with self._lock:
            self._started[run_id] = time.perf_counter()

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        usage = (response.llm_output or {}).get("token_usage") or {}
        message = getattr(response.generations[0][0], "message", None)
        meta = getattr(message, "usage_metadata", None) or {}
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if prompt is None:
            prompt, completion = meta.get("input_tokens", 0), meta.get("output_tokens", 0)
        cached = _cached_tokens(usage, meta)
        with self._lock:
            started = self._started.pop(run_id, time.perf_counter())
            seconds = time.perf_counter() - started
            self.calls.append(CallRecord(int(prompt or 0), int(completion or 0), seconds, cached))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._started.pop(run_id, None)
            self.errors += 1

    def snapshot(self) -> dict[str, float]:
        """Totals so far; subtract two snapshots to cost one question."""
        with self._lock:
            return {
                "llm_calls": len(self.calls),
                "input_tokens": sum(c.input_tokens for c in self.calls),
                "cached_tokens": sum(c.cached_tokens for c in self.calls),
                "output_tokens": sum(c.output_tokens for c in self.calls),
                "llm_seconds": sum(c.seconds for c in self.calls),
                "llm_errors": self.errors,
            }


def _root_cause(exc: BaseException) -> str:
    """What went wrong underneath a client error ("Connection refused", "Server
    disconnected without sending a response"), not the wrappers' "Connection error."."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc).strip() or type(exc).__name__
    return re.sub(r"^\[Errno -?\d+\] ", "", text).rstrip(".")[:200]


class EmbeddedServer:
    """llama.cpp's `llama-server` on loopback, owned by this process.

    Its slots keep their last prompt, and a request goes to the slot whose prompt shares
    most with it, so a prompt's stable head (instructions, examples, the question) is
    read once and reused. Concurrent requests are batched across slots. `/metrics` is on
    for operators."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model_path = require_model(settings)
        self.engine = require_engine(settings, self.model_path)
        self.draft_path = (
            require_model(settings, settings.llm_draft_model) if settings.llm_draft_model else None
        )
        self.port = settings.llm_port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def log_path(self) -> Path:
        return self.settings.home / "logs" / f"llm-server-{self.port}.log"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def server_args(self) -> list[str]:
        """`llama-server` with the settings' model, slots, threads and options."""
        s = self.settings
        threads = s.llm_threads or os.cpu_count() or 1
        args = [
            str(self.engine),
            "--model", str(self.model_path),
            "--alias", s.model,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--ctx-size", str(s.llm_ctx * s.llm_slots),
            "--parallel", str(s.llm_slots),
            "--threads", str(threads),
            "--threads-batch", str(threads),
            "--flash-attn", "on" if s.llm_flash_attn else "off",
            "--cache-reuse", str(SERVER_CACHE_REUSE_TOKENS),
            "--metrics",
            "--no-webui",
        ]  # fmt: skip
        if self.draft_path is not None:
            args += ["--model-draft", str(self.draft_path), "--threads-draft", str(threads)]
        return args

    def command(self) -> list[str]:
        """The server under `app.llm.server`, which ends it when this process is gone."""
        return [sys.executable, "-m", "app.llm.server", str(os.getpid()), *self.server_args()]

    def start(self) -> EmbeddedServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.starts += 1
        if self.starts == 1:
            atexit.register(self.stop)
        self._wait_healthy()
        return self

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def restart(self) -> None:
        """A new server, on a new free port unless the port is fixed: the dead one's
        may not be free yet."""
        self.stop()
        if not self.settings.llm_port:
            self.port = free_port()
        self.start()

    def _wait_healthy(self) -> None:
        assert self.process is not None
        if wait_healthy(self.process, self.root_url, SERVER_START_TIMEOUT_S):
            return
        if self.process.poll() is not None:
            raise self.died()
        self.stop()
        raise ServiceError(
            f"the embedded LLM server did not become healthy in {SERVER_START_TIMEOUT_S:.0f}s",
            hint=f"see {self.log_path}",
        )

    def log_tail(self, lines: int = 3) -> str:
        return log_tail(self.log_path, lines)

    def died(self) -> ServiceError:
        """The one clear error for a server process that has ended: how it ended, its
        log's last lines and path, and what to do. A signal is a crash of the engine
        itself (on a CPU it was not built for, say), so the fix is to rebuild it."""
        assert self.process is not None and self.process.returncode is not None
        code = self.process.returncode
        crashed = code < 0 or code > 128
        what = REBUILD_HINT if crashed else "check the model with `hoprag models verify`"
        return ServiceError(
            f"the embedded LLM server (llama-server) {exit_reason(code)}: {self.log_tail(4)}",
            hint=f"full log: {self.log_path}; {what}",
        )

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is not None:
            stop_process(proc)

    def serve_forever(self) -> int:
        """Foreground mode for `hoprag llm serve`: the server's output goes to the terminal."""
        return subprocess.call(self.server_args())


class LLMGateway:
    """One chat model per process, metered, with yes/no probabilities."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.meter = UsageMeter()
        self.server: EmbeddedServer | None = None
        self.restarts = 0
        self._chat: ChatOpenAI | None = None
        self._lock = threading.Lock()
        self._revive_lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return self.settings.llm_model or self.settings.model

    @property
    def base_url(self) -> str:
        if self.settings.llm_base_url:
            return self.settings.llm_base_url
        return self.server.base_url if self.server else "(embedded, not started)"

    def chat(self) -> ChatOpenAI:
        """The shared `ChatOpenAI`; starts the embedded server on first use."""
        with self._lock:
            if self._chat is None:
                base_url = self.settings.llm_base_url
                if not base_url:
                    if self.server is None:
                        self.server = EmbeddedServer(self.settings).start()
                    base_url = self.server.base_url
                self._chat = ChatOpenAI(
                    model=self.model_name,
                    base_url=base_url,
                    api_key=self.settings.llm_api_key,
                    temperature=0.0,
                    timeout=self.settings.llm_timeout_s,
                    max_retries=self.settings.llm_max_retries,
                    callbacks=[self.meter],
                )
            return self._chat

    def invoke(self, messages: Sequence[BaseMessage], max_tokens: int | None = None) -> str:
        """Plain-text completion of a chat; endpoint failures become `ServiceError`."""
        reply = self._call(messages, max_tokens=max_tokens or self._answer_tokens())
        if not isinstance(reply.content, str):
            raise ServiceError(f"the LLM endpoint {self.base_url} returned non-text content")
        return reply.content.strip()

    def _answer_tokens(self) -> int:
        """The running graph's `max_answer_tokens` (a server run's `context` may set it),
        else the gateway's own: the answering nodes leave the cap to the gateway."""
        try:
            runtime = get_runtime()
        except RuntimeError:  # outside a graph run: the eval's judge, a script
            runtime = None
        if runtime is None or runtime.context is None:
            return self.settings.max_answer_tokens
        return Settings.of(runtime).max_answer_tokens

    def p_yes(self, messages: Sequence[BaseMessage]) -> float:
        """p(yes) from the first generated token's top log-probabilities, renormalised
        over the yes and no tokens so that it is a probability of the binary answer."""
        reply = self._call(messages, logprobs=True, top_logprobs=5, max_tokens=1)
        content = (reply.response_metadata.get("logprobs") or {}).get("content") or []
        if not content:
            raise ServiceError(
                f"the LLM endpoint {self.base_url} returned no log-probabilities",
                hint="use an endpoint that supports `logprobs` and `top_logprobs`",
            )
        yes = no = 0.0
        for cand in content[0].get("top_logprobs") or []:
            token = str(cand.get("token", "")).strip().lower()
            prob = math.exp(float(cand.get("logprob", -math.inf)))
            if token in YES_TOKENS:
                yes += prob
            elif token in NO_TOKENS:
                no += prob
        if yes + no == 0.0:
            return 0.5  # neither answer among the top tokens: no evidence either way
        return yes / (yes + no)

    def _call(self, messages: Sequence[BaseMessage], **options: Any) -> AIMessage:
        """One chat completion with `options` (max_tokens, logprobs, ...). An embedded
        server that died is restarted once per gateway and the call retried."""
        started = self.server.starts if self.server else 0
        try:
            return self._complete(messages, options)
        except ServiceError:
            if not self._revived_since(started):
                raise
        return self._complete(messages, options)

    def _revived_since(self, started: int) -> bool:
        """Whether a server that died under a call is serving again: restarted here, the
        first time it dies, or by a concurrent call meanwhile. A second death is the
        server's own clear error, not the client's "does not answer"."""
        with self._revive_lock:
            server = self.server
            if server is None:
                return False
            if server.is_alive():
                return server.starts > started
            if server.process is None:  # stopped by this process, not dead
                return False
            if self.restarts >= 1:
                raise server.died()
            self.restarts += 1
            how = exit_reason(server.process.returncode)
            print(
                f"warning: the embedded LLM server died: it {how} ({server.log_tail(1)}); "
                "restarting it",
                file=sys.stderr,
            )
            server.restart()
            with self._lock:
                self._chat = None  # the next call binds the new server's address
            return True

    def _complete(self, messages: Sequence[BaseMessage], options: dict[str, Any]) -> AIMessage:
        chat = self.chat()  # its own errors (a server that will not start) are clear already
        try:
            reply = chat.bind(**options).invoke(list(messages))
        except openai.APITimeoutError:
            raise ServiceError(
                f"the LLM endpoint {self.base_url} timed out: no reply within "
                f"{self.settings.llm_timeout_s:g}s in {self._attempts}",
                hint="raise HOPRAG_LLM_TIMEOUT_S or HOPRAG_LLM_MAX_RETRIES, or check the "
                "endpoint's load",
            ) from None
        except openai.APIConnectionError as exc:
            raise ServiceError(
                f"the LLM endpoint {self.base_url} does not answer ({_root_cause(exc)}; "
                f"{self._attempts})",
                hint="check HOPRAG_LLM_BASE_URL, or unset it to use the embedded model",
            ) from None
        except openai.APIStatusError as exc:
            raise ServiceError(
                f"the LLM endpoint {self.base_url} answered HTTP {exc.status_code}: "
                f"{str(exc)[:200]}",
                hint="check the model name (HOPRAG_LLM_MODEL) and the API key",
            ) from None
        except (openai.APIError, ValueError, KeyError, TypeError) as exc:
            raise ServiceError(
                f"the LLM endpoint {self.base_url} answered something that is not an "
                f"OpenAI chat completion: {str(exc)[:200]}",
                hint="check that HOPRAG_LLM_BASE_URL points at an OpenAI-compatible /v1",
            ) from None
        if not isinstance(reply, AIMessage):
            raise ServiceError(f"the LLM endpoint {self.base_url} returned no message")
        return reply

    @property
    def _attempts(self) -> str:
        """How hard it tried: ChatOpenAI retries with exponential backoff."""
        n = 1 + self.settings.llm_max_retries
        return f"{n} attempts with backoff" if n > 1 else "1 attempt"

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
