"""The embedded inference engine: llama.cpp's own `llama-server`, compiled on this machine.

No prebuilt binary can be downloaded here, but PyPI carries the llama.cpp sources: the
pinned llama-cpp-python sdist vendors them. `build` fetches that sdist with pip, compiles
only the `llama-server` target (static, tuned for this CPU, no web UI, no TLS) and
installs the binary under ``HOPRAG_HOME/models/engine``. A stamp beside it records what
was built, so a second run rebuilds nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tqdm import tqdm

from app.errors import UserError
from app.settings import ENGINE_CMAKE_FLAGS, ENGINE_SDIST, Settings

_PERCENT = re.compile(r"^\[\s*(\d+)%\]")
_VENDORED = "vendor/llama.cpp/"


def engine_dir(settings: Settings) -> Path:
    return settings.models_dir / "engine"


def engine_path(settings: Settings) -> Path:
    """Where the compiled server lives; its name carries the sdist's version."""
    version = ENGINE_SDIST.partition("==")[2]
    return engine_dir(settings) / f"llama-server-{version}"


def _stamp() -> dict[str, object]:
    return {"sdist": ENGINE_SDIST, "cmake_flags": list(ENGINE_CMAKE_FLAGS)}


def _stamp_path(binary: Path) -> Path:
    return binary.with_name(binary.name + ".json")


def is_built(settings: Settings) -> bool:
    """The binary is there and was built from today's sdist with today's flags."""
    binary = engine_path(settings)
    try:
        stamp = json.loads(_stamp_path(binary).read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return binary.is_file() and os.access(binary, os.X_OK) and stamp == _stamp()


def require_engine(settings: Settings) -> Path:
    """The compiled server, or a clear error saying how to build it."""
    if is_built(settings):
        return engine_path(settings)
    raise UserError(
        "the embedded llama.cpp server is not built",
        hint="run `hoprag llm build` (about 10 minutes on 2 cores, once), or set "
        "HOPRAG_LLM_BASE_URL to an OpenAI-compatible endpoint",
    )


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


def build(settings: Settings, *, progress: bool = True, force: bool = False) -> Path:
    """Compile `llama-server` unless today's build is already installed."""
    binary = engine_path(settings)
    if is_built(settings) and not force:
        return binary
    if not shutil.which("cmake") or not (shutil.which("c++") or shutil.which("g++")):
        raise UserError(
            "building the embedded llama.cpp server needs cmake and a C++ compiler",
            hint="Debian/Ubuntu: apt-get install cmake g++",
        )
    binary.parent.mkdir(parents=True, exist_ok=True)
    log = settings.home / "logs" / "engine-build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    archive = _fetch_sdist(settings.home / "downloads", log)
    with tempfile.TemporaryDirectory(prefix="hoprag-engine-") as tmp:
        source = _extract_llama_cpp(archive, Path(tmp) / "src")
        out = Path(tmp) / "build"
        configure = ["cmake", "-S", str(source), "-B", str(out), *ENGINE_CMAKE_FLAGS]
        _run(configure, log, "configuring llama.cpp")
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        compile_ = ["cmake", "--build", str(out), "--target", "llama-server", "-j", jobs]
        with tqdm(
            total=100, unit="%", desc="compiling llama-server", disable=not progress or None
        ) as bar:
            _run(compile_, log, "compiling llama-server", bar)
        partial = binary.with_name(binary.name + ".partial")
        shutil.copy2(out / "bin" / "llama-server", partial)
        os.replace(partial, binary)
    _stamp_path(binary).write_text(json.dumps(_stamp()))
    return binary
