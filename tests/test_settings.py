"""Settings: environment fallbacks, and overrides that stick."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from app.checks import check_benchmarks
from app.errors import UserError
from app.settings import Settings
from tests.conftest import ROOT


def test_environment_fills_fields_left_at_their_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOPRAG_W", "7")
    monkeypatch.setenv("HOPRAG_QA_CACHE", "off")
    settings = Settings(max_steps=3)
    assert (settings.w, settings.qa_cache, settings.max_steps) == (7, False, 3)
    assert Settings(w=12).w == 12  # an explicit value beats the environment


def test_override_to_a_default_value_is_not_refilled_from_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The embedded judge clears llm_base_url; the reader's endpoint must not leak back.
    monkeypatch.setenv("HOPRAG_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    reader = Settings()
    assert reader.llm_base_url == "http://127.0.0.1:9/v1"
    judge = reader.with_overrides(llm_base_url="", model="qwen2.5-coder-0.5b", tau_rel=None)
    assert judge.llm_base_url == ""
    assert judge.model == "qwen2.5-coder-0.5b"
    assert judge.tau_rel == reader.tau_rel  # None means "leave as is"
    assert reader.llm_base_url == "http://127.0.0.1:9/v1"  # the original is untouched


def test_bad_values_are_user_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOPRAG_W", "ten")
    with pytest.raises(UserError, match="HOPRAG_W"):
        Settings()
    monkeypatch.delenv("HOPRAG_W")
    with pytest.raises(UserError, match="retrieval"):
        Settings().with_overrides(retrieval="magic")
    with pytest.raises(TypeError, match="unknown settings"):
        Settings().with_overrides(colour="blue")


def test_request_settings_are_the_method_knobs_with_their_types() -> None:
    """A server run's `context`: tuning is allowed, where files and endpoints are is not."""
    settings = Settings().with_request({"w": 7, "tau_rel": 1, "retrieval": "bm25"}, strict=True)
    assert (settings.w, settings.tau_rel, settings.retrieval) == (7, 1.0, "bm25")
    assert Settings().with_request({"w": "7"}).w == 7  # a string is read, unless strict
    for bad, message in [
        ({"w": "7"}, "not a valid int"),
        ({"w": True}, "not a valid int"),
        ({"tau_rel": [1]}, "not a valid float"),
        ({"home": "/"}, "cannot be set per request"),
        ({"llm_base_url": "http://elsewhere/v1"}, "cannot be set per request"),
        ({"retrieval": "psychic"}, "unknown retrieval 'psychic'"),
        ({"sub_questions": "guess"}, "use one of: write, plan"),
    ]:
        with pytest.raises(UserError, match=message):
            Settings().with_request(bad, strict=True)


def test_every_setting_is_in_the_guide_settings_table() -> None:
    guide = (ROOT / "docs" / "guide.md").read_text()
    table = guide.split("## Settings", 1)[1].split("\n## ", 1)[0]
    missing = [f.name for f in fields(Settings) if f"`HOPRAG_{f.name.upper()}`" not in table]
    assert not missing, f"settings missing from docs/guide.md's table: {missing}"


def test_the_benchmark_folder_follows_hoprag_data(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("HOPRAG_DATA", raising=False)
    assert Settings(home=tmp_path / "home").data == tmp_path / "home" / "data"
    monkeypatch.setenv("HOPRAG_DATA", str(tmp_path))
    assert Settings().data == tmp_path


def test_missing_benchmarks_say_where_to_put_them(tmp_path: Path) -> None:
    (tmp_path / "musique").mkdir()
    (tmp_path / "musique" / "questions.json").write_text("[]")
    with pytest.raises(UserError, match=r"musique/corpus\.json does not exist") as raised:
        check_benchmarks(tmp_path)
    assert "HOPRAG_DATA" in raised.value.hint
    (tmp_path / "musique" / "corpus.json").write_text("[]")
    assert check_benchmarks(tmp_path, ["musique"]) == tmp_path
