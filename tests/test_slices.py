"""The tuning and validation slices (issue 52): which questions each selects through
`hoprag eval run --offset/--limit`, where their runs land, and how bench.render shows a
validation run beside the tuning one. Every question here is made up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import bench.render as render
from app.cli import app
from app.errors import UserError
from app.eval.benchmark import load_questions
from bench.common import SLICES, TUNING_SIZE, run_name
from bench.run_systems import slice_args
from tests.conftest import SAMPLE_CORPUS

DEV = TUNING_SIZE + 10  # dev questions in the made-up file: ten past the tuning slice


@pytest.fixture
def questions(tmp_path: Path) -> Path:
    """Dev questions interleaved with train ones, as a benchmark file holds both."""
    items = [
        {"id": f"{split}-{i}", "question": f"Who is person {i}?", "answer": "X", "split": split}
        for i in range(DEV)
        for split in ("dev", "train")
    ]
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(items))
    return path


def _slice_ids(questions: Path, slice_: str, limit: int | None = None) -> list[str]:
    """The ids `hoprag eval run` selects with the options bench.run_systems passes."""
    args = slice_args(slice_, limit)
    options = {k.removeprefix("--"): int(v) for k, v in zip(args[::2], args[1::2], strict=True)}
    return [q.id for q in load_questions(questions, split="dev", **options)]


def test_the_slices_split_the_dev_questions_without_overlap(questions: Path) -> None:
    dev = [f"dev-{i}" for i in range(DEV)]
    assert _slice_ids(questions, "tuning") == dev[:TUNING_SIZE]
    assert _slice_ids(questions, "validation") == dev[TUNING_SIZE:]
    assert _slice_ids(questions, "validation", limit=3) == dev[TUNING_SIZE : TUNING_SIZE + 3]
    assert _slice_ids(questions, "tuning", limit=5) == dev[:5]
    assert _slice_ids(questions, "tuning", limit=TUNING_SIZE + 5) == dev[:TUNING_SIZE]


def test_the_tuning_slice_runs_as_before_slices_existed() -> None:
    assert slice_args("tuning") == ["--limit", str(TUNING_SIZE)]  # resumes the old runs
    assert slice_args("validation") == ["--offset", str(TUNING_SIZE)]


def test_offset_skips_after_the_split_and_ids_and_before_the_limit(
    questions: Path, tmp_path: Path
) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("dev-1\ndev-3\ndev-5\ndev-7\n")
    picked = load_questions(questions, split="dev", ids_file=ids, offset=1, limit=2)
    assert [q.id for q in picked] == ["dev-3", "dev-5"]
    with pytest.raises(UserError, match="--offset 4 skips all 4 questions"):
        load_questions(questions, ids_file=ids, offset=4)


def test_eval_run_passes_offset_and_refuses_one_past_the_end(
    questions: Path, tmp_path: Path
) -> None:
    common = ["eval", "run", "--data", str(questions), "--corpus", str(SAMPLE_CORPUS)]
    common += ["--system", "vanilla", "--out", str(tmp_path / "run"), "--split", "dev"]
    result = CliRunner().invoke(app, [*common, "--offset", str(DEV)])
    assert isinstance(result.exception, UserError)
    assert f"skips all {DEV} questions" in str(result.exception)
    assert not (tmp_path / "run").exists()  # refused before anything was written
    result = CliRunner().invoke(app, [*common, "--offset", "-1"])
    assert result.exit_code == 2  # typer's own refusal of a negative count


def test_run_folders_keep_their_names_and_validation_ones_say_so() -> None:
    assert set(SLICES) == {"tuning", "validation"}
    assert run_name("musique", "deft") == "musique-deft"
    assert run_name("musique", "deft", "validation") == "musique-deft-validation"
    assert run_name("musique", "deft", "validation", "x") == "musique-deft-x-validation"


def _run(results: Path, name: str, ems: list[float]) -> None:
    """A made-up run folder: run.json and one results line per question."""
    folder = results / "eval" / name
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"system": name, "index": "m", "date": "2026"}))
    rows = [
        {"id": f"q{i}", "group": "", "em": em, "f1": em, "words_fed": 10, "llm_calls": 2}
        | {"seconds": 1.0}
        for i, em in enumerate(ems)
    ]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_render_shows_validation_runs_beside_the_tuning_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(render, "RESULTS", tmp_path)
    _run(tmp_path, "musique-deft", [1, 1, 1, 0])
    _run(tmp_path, "musique-vanilla", [1, 0, 0, 0])
    before, standing_before = render.answering()
    assert "validation" not in before  # no validation run: the table as it was
    assert not any("validation slice" in target for target, _, _ in standing_before)

    _run(tmp_path, "musique-deft-validation", [1, 1, 0])
    text, standing = render.answering()
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    assert "| validation n | validation EM | validation p (EM) vs deft |" in rows["| system"]
    assert "| 4 | 0.750 |" in rows["| deft"] and "| 3 | 0.667 |  |" in rows["| deft"]
    assert "| - | - | - |" in rows["| vanilla"]  # not run on the validation slice
    gap = next(row for row in standing if "within 0.05" in row[0])
    assert gap[1:] == ("musique 0.667 (n=3) vs 0.750", "not met")
    assert not any("above `vanilla` on the validation" in target for target, _, _ in standing)

    _run(tmp_path, "musique-vanilla-validation", [0, 1])
    _, standing = render.answering()
    lead = next(row for row in standing if "above `vanilla` on the validation" in row[0])
    assert lead[1:] == ("musique: 1.000 vs 0.500 on 2 shared, p = 1.000", "not met")
