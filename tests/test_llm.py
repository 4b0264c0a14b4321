"""The LLM gateway against the real embedded llama.cpp server, and against bad endpoints."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

import app.llm.gateway as llm
from app.errors import ServiceError
from app.llm.engine import engine_dir, free_port
from app.llm.gateway import LLMGateway
from app.settings import Settings

YES_NO = "Answer the question with yes or no."


def test_embedded_server_answers_meters_and_caps(gateway: LLMGateway) -> None:
    before = gateway.meter.snapshot()
    reply = gateway.invoke([HumanMessage("What is the capital of France? One word.")])
    assert "paris" in reply.lower()
    poem = gateway.invoke([HumanMessage("Write a long poem about the sea.")], max_tokens=4)
    after = gateway.meter.snapshot()
    assert after["llm_calls"] - before["llm_calls"] == 2
    assert after["input_tokens"] - before["input_tokens"] > 20
    assert 1 <= after["output_tokens"] - before["output_tokens"] <= 4 + 10
    assert after["llm_seconds"] > before["llm_seconds"]
    assert len(poem.split()) <= 4
    # the URL that error messages name is the one the client talks to, and it serves the model
    assert gateway.base_url == gateway.chat().openai_api_base
    with urllib.request.urlopen(f"{gateway.base_url}/models", timeout=10) as listing:
        assert [m["id"] for m in json.load(listing)["data"]] == [gateway.model_name]
    assert gateway.server is not None and gateway.server.port != 2024


def test_yes_no_probabilities_through_the_gateway(gateway: LLMGateway) -> None:
    p_true = gateway.p_yes([SystemMessage(YES_NO), HumanMessage("Is Paris in France?")])
    p_false = gateway.p_yes([SystemMessage(YES_NO), HumanMessage("Is Paris in Japan?")])
    assert 0.0 <= p_false < 0.5 < p_true <= 1.0


def test_second_gateway_can_use_the_first_as_an_endpoint(
    gateway: LLMGateway, settings: Settings
) -> None:
    gateway.chat()
    assert gateway.server is not None
    remote = LLMGateway(
        settings.with_overrides(llm_base_url=gateway.server.base_url, llm_model="anything")
    )
    hi = [HumanMessage("Name the capital of France.")]
    assert remote.invoke(hi, max_tokens=3) == gateway.invoke(hi, max_tokens=3)
    assert remote.server is None  # an endpoint was given, so nothing was started
    question = [SystemMessage(YES_NO), HumanMessage("Is Paris in France?")]
    assert remote.p_yes(question) == pytest.approx(gateway.p_yes(question), abs=0.02)
    assert remote.p_yes(question) > 0.5
    assert remote.meter.snapshot()["llm_calls"] == 3  # its own calls, metered


def test_endpoint_that_does_not_answer(settings: Settings) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    gw = LLMGateway(
        settings.with_overrides(llm_base_url=dead, llm_max_retries=0, llm_timeout_s=5.0)
    )
    with pytest.raises(ServiceError, match="does not answer"):
        gw.invoke([HumanMessage("hi")])


class _Garbage(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = b"<html>this is not an API</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def garbage_url() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Garbage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_endpoint_that_answers_garbage(settings: Settings, garbage_url: str) -> None:
    gw = LLMGateway(settings.with_overrides(llm_base_url=garbage_url, llm_max_retries=0))
    with pytest.raises(ServiceError, match=r"not an OpenAI chat completion|returned"):
        gw.invoke([HumanMessage("hi")])
    with pytest.raises(ServiceError):
        gw.p_yes([HumanMessage("hi")])


def test_no_free_port(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: socket.socket, address: object) -> None:
        raise OSError(98, "Address already in use")

    monkeypatch.setattr(socket.socket, "bind", refuse)
    with pytest.raises(ServiceError, match="no free loopback port"):
        free_port()


@pytest.mark.e2e  # starts the real llama-server binary
def test_server_that_cannot_start_is_reported(
    tmp_path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model file that passes our record check but is not a GGUF (say, replaced by hand):
    the server process dies, and we say so with its log instead of hanging."""
    import hashlib
    import json

    import app.llm.models as models

    junk = b"this is not a gguf file" * 100
    model = models.ChatModel(
        "junk", "not a model", "junk.gguf", "none-part", 1, "0", hashlib.sha256(junk).hexdigest()
    )
    monkeypatch.setitem(models.CHAT_MODELS, "junk", model)
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    (home / "models" / "engine").symlink_to(engine_dir(settings), target_is_directory=True)
    (home / "models" / "junk.gguf").write_bytes(junk)
    (home / "models" / "junk.gguf.verified").write_text(
        json.dumps({"sha256": model.sha256, "size": len(junk)})
    )
    server = llm.EmbeddedServer(Settings(home=home, model="junk"))
    with pytest.raises(ServiceError, match="exited with code"):
        server.start()
    assert server.process is None or server.process.poll() is not None


def test_a_repeated_prompt_head_is_reused_not_read_again(gateway: LLMGateway) -> None:
    """The server's slots keep their prompts: a second call that shares the first one's
    instructions reads only what differs, and the meter records the reused tokens."""
    head = SystemMessage(
        "You answer questions about rivers using only what you are told. "
        + " ".join(f"Rule {i}: reply with one word and never explain." for i in range(30))
    )
    gateway.invoke([head, HumanMessage("Which river flows through Paris?")], max_tokens=4)
    before = gateway.meter.snapshot()
    gateway.invoke([head, HumanMessage("Which river flows through Rome?")], max_tokens=4)
    after = gateway.meter.snapshot()
    read = after["input_tokens"] - before["input_tokens"]
    reused = after["cached_tokens"] - before["cached_tokens"]
    assert read > 300 and 0.8 * read < reused < read


def _kill(server: llm.EmbeddedServer) -> None:
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait()


@pytest.mark.e2e  # the real chat model
def test_the_embedded_server_exposes_metrics_and_restarts_once(settings: Settings) -> None:
    """Operators can read /metrics; a server that dies is restarted once, transparently,
    and a second death is a clear error: how it ended and where its log is."""
    gw = LLMGateway(settings.with_overrides(llm_max_retries=0))
    try:
        assert "paris" in gw.invoke([HumanMessage("Capital of France? One word.")]).lower()
        assert gw.server is not None
        with urllib.request.urlopen(f"{gw.server.root_url}/metrics", timeout=10) as resp:
            assert "llamacpp:prompt_tokens_total" in resp.read().decode()
        _kill(gw.server)
        assert "rome" in gw.invoke([HumanMessage("Capital of Italy? One word.")]).lower()
        assert gw.restarts == 1 and gw.server.is_alive()
        _kill(gw.server)
        with pytest.raises(ServiceError, match="was killed by SIGKILL") as info:
            gw.invoke([HumanMessage("Capital of Spain? One word.")])
        assert str(gw.server.log_path) in info.value.hint
    finally:
        gw.close()


def test_the_meter_reads_reused_tokens_from_either_usage_shape() -> None:
    """OpenAI's and llama.cpp's `prompt_tokens_details`, or LangChain's `cache_read`."""
    from uuid import uuid4

    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, LLMResult

    meter = llm.UsageMeter()
    raw = {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "prompt_tokens_details": {"cached_tokens": 7},
    }
    meter.on_llm_end(
        LLMResult(
            generations=[[ChatGeneration(message=AIMessage(""))]], llm_output={"token_usage": raw}
        ),
        run_id=uuid4(),
    )
    usage = {"input_tokens": 20, "output_tokens": 1, "total_tokens": 21}
    message = AIMessage("", usage_metadata={**usage, "input_token_details": {"cache_read": 5}})
    meter.on_llm_end(LLMResult(generations=[[ChatGeneration(message=message)]]), run_id=uuid4())
    totals = meter.snapshot()
    assert (totals["input_tokens"], totals["cached_tokens"], totals["output_tokens"]) == (30, 12, 3)
