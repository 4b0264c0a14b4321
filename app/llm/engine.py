"""The embedded inference engine: llama.cpp's own `llama-server`, compiled on this machine.

No prebuilt binary can be downloaded here, but PyPI carries the llama.cpp sources: the
pinned llama-cpp-python sdist vendors them. `build` fetches that sdist with pip and
compiles only the `llama-server` target (static, no web UI, no TLS).

A binary is installed under ``HOPRAG_HOME/models/engine`` only once it has passed a smoke
run on this CPU: it loads the chat model and writes a few tokens. The instruction sets
are chosen from the CPU's flags (app/llm/cpu.py), never by `-march=native`, and AMX is
never turned on. A build that dies in its smoke
run is replaced by the next, more portable flag set. A stamp beside the binary records
the sources, the flag set, the CPU it was chosen for and every CPU it has run on; a
binary met on a CPU it has not run on (a home directory copied to another machine) is
smoke-run again before use.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from app.errors import ServiceError, UserError
from app.llm.cpu import Cpu, FlagSet, flag_sets
from app.settings import (
    ENGINE_CMAKE_FLAGS,
    ENGINE_SDIST,
    ENGINE_SMOKE_PROMPT,
    ENGINE_SMOKE_TIMEOUT_S,
    ENGINE_SMOKE_TOKENS,
    SERVER_HEALTH_POLL_S,
    Settings,
)

_PERCENT = re.compile(r"^\[\s*(\d+)%\]")
_VENDORED = "vendor/llama.cpp/"
REBUILD_HINT = "rebuild the engine on this machine: `hoprag llm build --force`"


def engine_dir(settings: Settings) -> Path:
    return settings.models_dir / "engine"


def engine_path(settings: Settings) -> Path:
    """Where the compiled server lives; its name carries the sdist's version."""
    version = ENGINE_SDIST.partition("==")[2]
    return engine_dir(settings) / f"llama-server-{version}"


def _stamp_path(binary: Path) -> Path:
    return binary.with_name(binary.name + ".json")


def _stamp(flag_set: FlagSet, cpu: Cpu) -> dict[str, Any]:
    return {
        "sdist": ENGINE_SDIST,
        "cmake_flags": list(ENGINE_CMAKE_FLAGS),
        "flag_set": flag_set.name,
        "isa_flags": list(flag_set.cmake_flags),
        "built_for": cpu.key(),
        "runs_on": [cpu.key()],
    }


def read_stamp(settings: Settings) -> dict[str, Any] | None:
    """The installed build's stamp, if it is readable and from today's sources."""
    binary = engine_path(settings)
    try:
        stamp = json.loads(_stamp_path(binary).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    current = (
        isinstance(stamp, dict)
        and stamp.get("sdist") == ENGINE_SDIST
        and stamp.get("cmake_flags") == list(ENGINE_CMAKE_FLAGS)
        and isinstance(stamp.get("isa_flags"), list)
        and isinstance(stamp.get("runs_on"), list)
    )
    if not current or not binary.is_file() or not os.access(binary, os.X_OK):
        return None
    return stamp


def _write_stamp(binary: Path, stamp: dict[str, Any]) -> None:
    path = _stamp_path(binary)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(stamp, indent=1))
    os.replace(tmp, path)


def is_built(settings: Settings) -> bool:
    """A binary from today's sources and flags is installed (it may not be proven here)."""
    return read_stamp(settings) is not None


def runs_here(settings: Settings, cpu: Cpu | None = None) -> bool:
    """The installed binary has passed a smoke run on a CPU like this one."""
    stamp = read_stamp(settings)
    return stamp is not None and (cpu or Cpu.here()).key() in stamp["runs_on"]


def require_engine(settings: Settings, model: Path) -> Path:
    """The compiled server, proven on this CPU; one met on another CPU is smoke-run first.

    A clear error says how to build it when it is missing or does not run here."""
    stamp = read_stamp(settings)
    if stamp is None:
        raise UserError(
            "the embedded llama.cpp server is not built",
            hint="run `hoprag llm build` (about 10 minutes on 2 cores, once), or set "
            "HOPRAG_LLM_BASE_URL to an OpenAI-compatible endpoint",
        )
    cpu = Cpu.here()
    if cpu.key() in stamp["runs_on"]:
        return engine_path(settings)
    print("checking that llama-server, built on another CPU, runs on this one ...", file=sys.stderr)
    try:
        return _prove_here(settings, model, cpu, _log_path(settings, "engine-smoke"))
    except SmokeFailure as exc:
        raise ServiceError(
            f"the embedded llama.cpp server was built on another CPU and does not run on "
            f"this one: {exc}",
            hint=REBUILD_HINT,
        ) from None


def _prove_here(settings: Settings, model: Path, cpu: Cpu, log: Path) -> Path:
    """Smoke-run the installed binary on this CPU and record it in the stamp, or raise
    `SmokeFailure`."""
    binary = engine_path(settings)
    smoke_run(binary, model, log, settings.llm_threads)
    stamp = json.loads(_stamp_path(binary).read_text())
    if cpu.key() not in stamp["runs_on"]:
        stamp["runs_on"].append(cpu.key())
        _write_stamp(binary, stamp)
    return binary


# -- Processes: free ports, exit statuses, the smoke run -------------------------------


def free_port() -> int:
    """A free loopback TCP port, chosen by the kernel."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])
    except OSError as exc:
        raise ServiceError(
            f"no free loopback port for the embedded LLM server: {exc}",
            hint="free a port, or set HOPRAG_LLM_PORT to one that is free",
        ) from None


def exit_reason(returncode: int) -> str:
    """How a server process ended: "was killed by SIGSEGV (signal 11)" or "exited with
    code 1". Negative codes are signals (Popen); so are codes above 128, the shell's way,
    which app/llm/server.py uses to pass on the signal that ended llama-server."""
    signum = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    try:
        name = signal.Signals(signum).name if signum else ""
    except ValueError:
        name = ""
    if name:
        return f"was killed by {name} (signal {signum})"
    return f"exited with code {returncode}"


def log_tail(path: Path, lines: int = 3) -> str:
    """The last lines of a server's log, on one line."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(line.strip() for line in text[-lines:]) or "(empty log)"


def _log_path(settings: Settings, name: str) -> Path:
    path = settings.home / "logs" / f"{name}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


class SmokeFailure(Exception):
    """A build that did not load the model and write tokens; the message says how."""


def post_json(url: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    """POST `body` to a llama-server endpoint and read its JSON reply."""
    request = urllib.request.Request(
        url, json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        return json.loads(resp.read())


def smoke_run(binary: Path, model: Path, log: Path, threads: int | None = None) -> str:
    """Start `binary` on `model`, have it read a prompt and write a few tokens, stop it.

    Returns the text it wrote; raises `SmokeFailure` with the signal or exit code and the
    log's last lines when it dies, hangs or writes nothing."""
    port = free_port()
    threads = threads or os.cpu_count() or 1
    command = [
        str(binary),
        "--model", str(model),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--ctx-size", "512",
        "--parallel", "1",
        "--threads", str(threads),
        "--no-webui",
    ]  # fmt: skip
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    root = f"http://127.0.0.1:{port}"

    def died() -> SmokeFailure:
        return SmokeFailure(f"{exit_reason(proc.returncode)}: {log_tail(log)}")

    try:
        if not wait_healthy(proc, root, ENGINE_SMOKE_TIMEOUT_S):
            if proc.poll() is not None:
                raise died()
            raise SmokeFailure(f"not ready in {ENGINE_SMOKE_TIMEOUT_S:.0f}s")
        body = {"prompt": ENGINE_SMOKE_PROMPT, "n_predict": ENGINE_SMOKE_TOKENS, "temperature": 0}
        try:
            reply = post_json(f"{root}/completion", body, ENGINE_SMOKE_TIMEOUT_S)
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError) as exc:
            time.sleep(SERVER_HEALTH_POLL_S)  # a crash closes the socket before the exit
            if proc.poll() is not None:
                raise died() from None
            raise SmokeFailure(f"no completion: {exc}") from None
        if int(reply.get("tokens_predicted") or 0) < 1:
            raise SmokeFailure(f"wrote no tokens: {str(reply)[:200]}")
        return str(reply.get("content", ""))
    finally:
        stop_process(proc)


def wait_healthy(proc: subprocess.Popen[bytes], root_url: str, timeout_s: float) -> bool:
    """Poll a starting llama-server's /health until it answers 200 (True), or until the
    process ends or the time is up (False: `proc.poll()` tells which)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:  # 503 while the model loads, 200 once it serves
            with urllib.request.urlopen(f"{root_url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(SERVER_HEALTH_POLL_S)
    return False


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Terminate a server, and kill it if it has not ended in 10 seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# -- Building ----------------------------------------------------------------------------


def _run(cmd: list[str], log: Path, what: str, bar: tqdm | None = None) -> None:
    """Run one build step, its output to `log`; cmake's `[ NN%]` lines move the bar."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            match = _PERCENT.match(line)
            if bar is not None and match:
                bar.n = int(match.group(1))
                bar.refresh()
        if proc.wait() != 0:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise UserError(
                f"{what} failed: {' | '.join(tail)}",
                hint=f"full log: {log}; the build needs cmake and a C++ compiler "
                "(Debian: apt-get install cmake g++)",
            )


def _fetch_sdist(dest: Path, log: Path) -> Path:
    """The llama-cpp-python source archive, downloaded with pip (kept for a rebuild)."""
    name, _, version = ENGINE_SDIST.partition("==")
    archive = dest / f"{name.replace('-', '_')}-{version}.tar.gz"
    if archive.is_file():
        return archive
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:"]
    _run([*cmd, "--progress-bar", "off", "-d", str(dest), ENGINE_SDIST], log, "pip download")
    if not archive.is_file():
        raise UserError(f"pip reported success but {archive.name} is not in {dest}")
    return archive


def _extract_llama_cpp(archive: Path, dest: Path) -> Path:
    """Only the vendored llama.cpp tree of the sdist."""
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if _VENDORED in m.name]
        if not members:
            raise UserError(f"{archive.name} holds no {_VENDORED} sources")
        tar.extractall(dest, members=members, filter="data")
    return next(dest.glob(f"*/{_VENDORED.rstrip('/')}"))


def compile_server(
    source: Path, out: Path, flag_set: FlagSet, log: Path, *, progress: bool = True
) -> Path:
    """Configure and compile `llama-server` with `flag_set` into `out`. A second flag set
    in the same `out` recompiles only ggml's CPU backend, the one target they change."""
    flags = [*ENGINE_CMAKE_FLAGS, *flag_set.cmake_flags]
    _run(["cmake", "-S", str(source), "-B", str(out), *flags], log, "configuring llama.cpp")
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    command = ["cmake", "--build", str(out), "--target", "llama-server", "-j", jobs]
    desc = f"compiling llama-server ({flag_set.name})"
    with tqdm(total=100, unit="%", desc=desc, disable=not progress or None) as bar:
        _run(command, log, "compiling llama-server", bar)
    return out / "bin" / "llama-server"


@dataclass
class BuildReport:
    """What `build` did: the binary, the flag set it kept, and the sets it turned down."""

    binary: Path
    flag_set: str
    compiled: bool
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (flag set, why)

    def summary(self) -> str:
        how = "compiled and passed its smoke run" if self.compiled else "passed its smoke run"
        lines = [f"{self.binary}: flag set '{self.flag_set}', {how} on this CPU"]
        lines += [f"  turned down '{name}': {why}" for name, why in self.rejected]
        if self.rejected:
            lines.append(
                "  a fall-back build answers more slowly (docs/decisions.md, Engine); an "
                "OpenAI-compatible endpoint (HOPRAG_LLM_BASE_URL) is the way around it"
            )
        return "\n".join(lines)


def install(candidate: Path, settings: Settings, flag_set: FlagSet, cpu: Cpu) -> Path:
    """Copy a binary that passed its smoke run on `cpu` into place, with its stamp."""
    binary = engine_path(settings)
    binary.parent.mkdir(parents=True, exist_ok=True)
    partial = binary.with_name(binary.name + ".partial")
    shutil.copy2(candidate, partial)
    os.replace(partial, binary)
    _write_stamp(binary, _stamp(flag_set, cpu))
    return binary


@contextmanager
def sources(settings: Settings, log: Path) -> Iterator[Path]:
    """The llama.cpp sources of the pinned sdist, unpacked in a folder that is removed
    afterwards; the downloaded archive is kept for a rebuild."""
    archive = _fetch_sdist(settings.home / "downloads", log)
    with tempfile.TemporaryDirectory(prefix="hoprag-engine-") as tmp:
        yield _extract_llama_cpp(archive, Path(tmp) / "src")


def build(
    settings: Settings,
    model: Path,
    *,
    progress: bool = True,
    force: bool = False,
    notify: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> BuildReport:
    """Make sure a `llama-server` that runs on this CPU is installed.

    An installed build from today's sources is kept if it has run here or passes a smoke
    run now. Otherwise (or with `force`) each flag set of `flag_sets` is compiled and
    smoke-run on `model` in turn, and the first that passes is installed."""
    binary = engine_path(settings)
    cpu = Cpu.here()
    log = _log_path(settings, "engine-build")
    stamp = read_stamp(settings)
    if stamp is not None and not force:
        if cpu.key() in stamp["runs_on"]:
            return BuildReport(binary, str(stamp.get("flag_set")), compiled=False)
        notify("llama-server was built on another CPU: checking that it runs on this one ...")
        try:
            _prove_here(settings, model, cpu, log)
        except SmokeFailure as exc:
            notify(f"it does not ({exc}); rebuilding")
        else:
            return BuildReport(binary, str(stamp.get("flag_set")), compiled=False)
    if not shutil.which("cmake") or not (shutil.which("c++") or shutil.which("g++")):
        raise UserError(
            "building the embedded llama.cpp server needs cmake and a C++ compiler",
            hint="Debian/Ubuntu: apt-get install cmake g++",
        )
    log.write_text("")
    rejected: list[tuple[str, str]] = []
    with sources(settings, log) as source:
        for flag_set in flag_sets(cpu):
            notify(f"compiling llama-server with flag set {flag_set.describe()} ...")
            out = source.parent / "build"
            candidate = compile_server(source, out, flag_set, log, progress=progress)
            try:
                smoke_run(candidate, model, log, settings.llm_threads)
            except SmokeFailure as exc:
                rejected.append((flag_set.name, f"its smoke run failed: {exc}"))
                notify(f"flag set '{flag_set.name}' failed its smoke run ({exc}); trying the next")
                continue
            binary = install(candidate, settings, flag_set, cpu)
            return BuildReport(binary, flag_set.name, compiled=True, rejected=rejected)
    raise ServiceError(
        "no build of llama-server passed its smoke run on this CPU: "
        + "; ".join(f"'{name}' {why}" for name, why in rejected),
        hint=f"full log: {log}; or set HOPRAG_LLM_BASE_URL to an OpenAI-compatible endpoint",
    )
