"""Throwaway local services for tests, benchmarks and trying a deployment on one machine.

Each is a context manager that starts one service on a free loopback port, waits until it
answers, yields its URL and, when the block ends (an error and Ctrl-C included), stops it
with its whole process group and removes its temporary folder:

- `postgres_server()`: a fresh PostgreSQL cluster made with `initdb` (Debian's
  `postgresql` package; `make postgres` installs it), run as the `postgres` user when
  this process is root; `new_database(url, name)` adds a database to it;
- `chroma_server()`: `chroma run` on an empty data folder;
- `model_endpoint(home)`: the embedded chat model as a separate process, `hoprag llm
  serve`, an OpenAI-compatible endpoint for `HOPRAG_LLM_BASE_URL`;
- `hoprag_server(home, env)`: `hoprag serve` (every graph behind `langgraph dev`, or
  with `production=True` behind Aegra on PostgreSQL); a `Server`, its URL and process,
  which a fault test may kill.

The hoprag ones run this checkout's code (`python -m app.cli` with it first on
PYTHONPATH), whatever else is installed. `bench.serve_load --scale-out` and
`--replicas` put them together; the scale-out tests use the first two.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from app.llm.engine import free_port
from app.postgres import local_cluster

SOURCE = Path(__file__).resolve().parents[1]  # the checkout: the folder holding `app`
CHROMA_START_TIMEOUT_S = 60
MODEL_START_TIMEOUT_S = 300  # loading the model on a busy 2-core machine
SERVE_START_TIMEOUT_S = 180
STOP_TIMEOUT_S = 30


class ServiceFailed(RuntimeError):
    """A service that did not start or exited early; the message ends with its log tail."""


def _tail(log: Path, chars: int = 2000) -> str:
    try:
        return log.read_text(errors="replace")[-chars:].strip()
    except OSError:
        return "(no log)"


@contextmanager
def postgres_server() -> Iterator[str]:
    """A fresh PostgreSQL cluster on a free loopback port; its connection string. The
    folder is a new one under the system's temporary folder (not pytest's root-only
    tree), so that the server's user can reach it."""
    folder = Path(tempfile.mkdtemp(prefix="hoprag-pg-"))
    try:
        with local_cluster(folder, durable=False) as url:
            yield url
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def new_database(postgres_url: str, name: str) -> str:
    """A new, empty database `name` on the server of `postgres_url` (a superuser's, as
    `postgres_server()` gives); its connection string."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return postgres_url.rsplit("/", 1)[0] + f"/{name}"


@contextmanager
def service(
    name: str,
    args: list[str],
    ready_url: str,
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    log: Path,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `args` in a process group of its own, output to `log`, until `ready_url`
    answers 200; the process. The group (the service and whatever it started) gets
    SIGTERM when the block ends, SIGKILL if it lingers."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise ServiceFailed(f"{name} exited with code {proc.returncode}: {_tail(log)}")
            if time.monotonic() > deadline:
                raise ServiceFailed(f"{name} did not answer in {timeout_s:.0f} s: {_tail(log)}")
            try:
                with urllib.request.urlopen(ready_url, timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:  # refused, 503 while loading, a timeout
                pass
            time.sleep(0.5)
        yield proc
    finally:
        _stop_group(proc)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:  # the whole group is gone
            return
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            continue
        try:  # the leader is gone; give what it started a moment, then make sure
            for _ in range(20):
                os.killpg(proc.pid, 0)
                time.sleep(0.1)
        except ProcessLookupError:
            return


@contextmanager
def chroma_server() -> Iterator[str]:
    """`chroma run` on an empty data folder on a free loopback port; its URL."""
    chroma = str(Path(sys.executable).with_name("chroma"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="hoprag-chroma-") as folder:
        args = [chroma, "run", "--path", f"{folder}/data", "--host", "127.0.0.1",
                "--port", str(port)]  # fmt: skip
        ready = f"{url}/api/v2/heartbeat"
        log = Path(folder) / "server.log"
        with service("chroma run", args, ready, timeout_s=CHROMA_START_TIMEOUT_S, log=log):
            yield url


def hoprag_env(home: Path | None = None, **extra: str) -> dict[str, str]:
    """This process's environment for a hoprag child: this checkout first on PYTHONPATH,
    HOPRAG_HOME if given, then `extra`."""
    path = os.pathsep.join(p for p in (str(SOURCE), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, **extra}
    if home is not None:
        env["HOPRAG_HOME"] = str(home)
    return env


@contextmanager
def model_endpoint(home: Path | None = None, log_dir: Path | None = None) -> Iterator[str]:
    """The embedded chat model as its own process (`hoprag llm serve`) on a free loopback
    port, once it has loaded the model; its OpenAI base URL (`HOPRAG_LLM_BASE_URL`).
    HOPRAG_MODEL, HOPRAG_LLM_SLOTS and the other embedded-server settings apply."""
    port = free_port()
    args = [sys.executable, "-m", "app.cli", "llm", "serve", "--port", str(port)]
    with (
        _log_folder(log_dir) as folder,
        service(
            "hoprag llm serve",
            args,
            f"http://127.0.0.1:{port}/health",
            timeout_s=MODEL_START_TIMEOUT_S,
            env=hoprag_env(home),
            cwd=SOURCE,
            log=folder / f"llm-serve-{port}.log",
        ),
    ):
        yield f"http://127.0.0.1:{port}/v1"


@dataclass(frozen=True)
class Server:
    """A running `hoprag serve`: its URL, and its process, the leader of a process group
    of its own (the server and whatever it started)."""

    url: str
    process: subprocess.Popen[bytes]

    def kill(self) -> None:
        """SIGKILL the whole group, as a crashed machine would stop it: no clean exit, no
        farewell to the database. The block that started it still cleans up after it."""
        os.killpg(self.process.pid, signal.SIGKILL)


@contextmanager
def hoprag_server(
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    log_dir: Path | None = None,
    production: bool = False,
) -> Iterator[Server]:
    """`hoprag serve` (`production`: with --production, Aegra on HOPRAG_POSTGRES_URL) on a
    free loopback port, once it answers its health check. `env` adds settings
    (HOPRAG_INDEX, HOPRAG_POSTGRES_URL, ...)."""
    port = free_port()
    with (
        _log_folder(log_dir) as folder,
        service(
            "hoprag serve" + (" --production" if production else ""),
            [sys.executable, "-m", "app.cli", "serve", *(["--production"] if production else [])],
            f"http://127.0.0.1:{port}/{'health' if production else 'ok'}",
            timeout_s=SERVE_START_TIMEOUT_S,
            env=hoprag_env(home, **{**(env or {}), "HOPRAG_PORT": str(port)}),
            cwd=SOURCE,
            log=folder / f"serve-{port}.log",
        ) as process,
    ):
        yield Server(f"http://127.0.0.1:{port}", process)


@contextmanager
def _log_folder(folder: Path | None) -> Iterator[Path]:
    """`folder`, or a temporary one removed afterwards."""
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="hoprag-log-") as tmp:
        yield Path(tmp)
