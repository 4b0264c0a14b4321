"""The embedded engine's build cache: a binary counts as built only with a stamp that
matches today's sdist and flags, and a missing one is a clear error, not a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import app.llm.engine as engine
from app.errors import UserError
from app.settings import Settings
from tests.conftest import assert_user_error, run_cli


def test_the_shipped_build_is_found_and_not_rebuilt(settings: Settings) -> None:
    """`make setup` built it; `hoprag llm build` then finds it and compiles nothing."""
    assert engine.is_built(settings)
    proc = run_cli("llm", "build", home=settings.home)
    assert proc.returncode == 0, proc.stderr
    assert "is built" in proc.stderr and "compiling" not in proc.stderr


def _fake_build(home: Path, stamp: object) -> Settings:
    settings = Settings(home=home)
    binary = engine.engine_path(settings)
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    engine._stamp_path(binary).write_text(json.dumps(stamp))
    return settings


def test_a_build_from_other_sources_or_flags_does_not_count(tmp_path: Path) -> None:
    current = json.loads(json.dumps(engine._stamp()))
    assert engine.is_built(_fake_build(tmp_path / "same", current))
    older = {**current, "sdist": "llama-cpp-python==0.3.1"}
    assert not engine.is_built(_fake_build(tmp_path / "older", older))
    other_flags = {**current, "cmake_flags": ["-DGGML_NATIVE=OFF"]}
    assert not engine.is_built(_fake_build(tmp_path / "flags", other_flags))


def test_a_missing_engine_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not built") as info:
        engine.require_engine(Settings(home=tmp_path))
    assert "hoprag llm build" in info.value.hint
    proc = run_cli("llm", "serve", "--port", "0", home=tmp_path)
    assert_user_error(proc, "not built", "hoprag llm build")
