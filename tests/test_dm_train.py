"""The DM trainer end to end on a handful of examples: it trains a LoRA adapter, fits the
calibration, saves a small adapter, and the saved model loads and scores like the trained
one. (Quality is measured by `hoprag dm eval`, not here.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.dm import eval as dm_eval
from app.dm import features as dm_features
from app.dm import runtime, torch_model, train
from app.dm.calibration import Platt
from app.dm.data import (
    DMExample,
    is_question_rel,
    question_batch,
    question_contexts,
    retrieval_signals_of,
    write_jsonl,
)
from app.errors import UserError
from app.index.corpus import passage_text
from tools.decision import DecisionModel, TrainedDM

PASSAGES = {
    1: "Raise Your Voice: Raise Your Voice is a 2004 film directed by Sean McNamara.",
    2: "Burbank: Burbank is a city in Los Angeles County, California.",
    3: "Basalt: Basalt is a fine-grained volcanic rock.",
}


def _examples() -> list[DMExample]:
    q = "Who directed Raise Your Voice?"
    rows = [
        DMExample("rel", q, PASSAGES[1], 1, "gold-step", "t", "a"),
        DMExample("rel", q, PASSAGES[3], 0, "retrieved-negative", "t", "a"),
        DMExample("same", q, "What is the director of Raise Your Voice?", 1, "tp", "t", "a"),
        DMExample("same", q, "When was Raise Your Voice released?", 0, "nm", "t", "a"),
        DMExample("suff", "Q?", "- Who directed X? Y", 0, "chain-prefix", "t", "a"),
        DMExample(
            "suff", "Q?", "- Who directed X? Y\n- Where was Y born? Z", 1, "gold-chain", "t", "a"
        ),
        DMExample("depth", "Who directed Raise Your Voice?", "", 1, "gold-hops", "t", "a"),
        DMExample(
            "depth",
            "When did the capital of the birthplace of X's director fall?",
            "",
            0,
            "gold-hops",
            "t",
            "a",
        ),
    ]
    whole = {"query": "question"}
    rows += [
        DMExample("rel", q, PASSAGES[1], 1, "gold-passage", "t", "a", whole),
        DMExample("rel", q, PASSAGES[2], 1, "gold-passage", "t", "a", whole),
        DMExample("rel", q, PASSAGES[3], 0, "retrieved-negative", "t", "a", whole),
    ]
    rows += [
        DMExample(
            "direct",
            q,
            "",
            1,
            "gold-in-top-w",
            "t",
            "a",
            {"passage_ids": [1, 3], "retrieval": [0.032, 0.002, 9.5]},
        ),
        DMExample(
            "direct",
            "Where was Y born?",
            "",
            0,
            "gold-in-top-w",
            "t",
            "b",
            {"passage_ids": [3], "retrieval": [0.030, 0.0, 2.1]},
        ),
    ]
    return rows


@pytest.fixture(scope="module")
def runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dm-runtime")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, runtime_dir: Path) -> tuple[Path, dict]:
    data = tmp_path_factory.mktemp("dm_data")
    write_jsonl(data / "train.jsonl", _examples())
    write_jsonl(data / "calib.jsonl", _examples())
    out = tmp_path_factory.mktemp("dm")
    meta = train.train(data, out, runtime_dir, passages=lambda _b, ids: [PASSAGES[i] for i in ids])
    return out, meta


def test_train_save_load_and_score(trained: tuple[Path, dict]) -> None:
    out, meta = trained
    assert meta["version"] == dm_features.DM_VERSION
    assert set(meta["platt"]) == set(dm_features.CROSS_KINDS)
    for model, features in (
        ("direct", dm_features.DIRECT_RETRIEVED_FEATURES),
        ("direct_gathered", dm_features.DIRECT_FEATURES),
    ):
        n = len(features)
        assert meta[model]["features"] == list(features)
        assert len(meta[model]["weights"]) == n + n * (n + 1) // 2 + 1  # squares, products
    m = len(dm_features.QUESTION_REL_FEATURES)
    assert len(meta["question_rel"]["weights"]) == m + m * (m + 1) // 2 + 1
    saved = json.loads((out / "dm.json").read_text())
    assert saved["platt"] == meta["platt"]
    # The depth model reads the question's embedding (384 numbers) and the adapter's logit.
    assert meta["depth_model"]["inputs"] == 385 and len(meta["depth_model"]["weights"]) == 386
    assert meta["depth_model"]["examples"] == 2 * sum(e.kind == "depth" for e in _examples())
    for adapter in dm_features.ADAPTERS:  # each trained on its own kinds, small enough to commit
        folder = out / adapter.folder
        assert meta["adapters"][adapter.name]["kinds"] == list(adapter.kinds)
        assert meta["adapters"][adapter.name]["train_examples"] == sum(
            e.kind in adapter.kinds for e in _examples()
        )
        assert 0 < (folder / "adapter_model.safetensors").stat().st_size < 20 * 2**20
        training = json.loads((folder / "training.json").read_text())
        curve = training["loss_per_100_batches"]
        assert curve and all(loss > 0 for loss in curve)  # how the training went, kept
        by_kind = training["loss_per_100_batches_by_kind"]  # a kind that stalls shows
        assert set(by_kind) == set(adapter.kinds)
        assert all(len(c) == len(curve) for c in by_kind.values())
        config = json.loads((folder / "adapter_config.json").read_text())
        assert config["base_model_name_or_path"] == train.BASE_MODEL_NAME  # no local path
    loaded = torch_model.load_model(out)
    pairs = [("rel", "Who directed Raise Your Voice?", PASSAGES[i]) for i in (1, 2, 3)]
    logits = loaded.logits(pairs)
    assert logits.shape == (3,) and np.isfinite(logits).all()
    long_passage = "word " * 5000  # longer than the window: cut, not an error
    assert np.isfinite(loaded.logits([("rel", "Q?", long_passage)])).all()


def test_the_fast_runtime_scores_like_the_model_and_is_built_once(
    trained: tuple[Path, dict], runtime_dir: Path, tmp_path: Path
) -> None:
    out, _ = trained
    pairs = [("rel", "Who directed Raise Your Voice?", PASSAGES[i]) for i in (1, 2, 3)]
    pairs.append(("same", "Who directed X?", "When was X released?"))
    pairs.append(("rel", "Q?", "word " * 5000))
    reference = torch_model.load_model(out).logits(pairs)
    built = sorted(runtime_dir.glob("dm-*.onnx"))
    assert len(built) == len(dm_features.ADAPTERS)  # calibration built them; serving reuses them
    stamp = built[0].stat().st_mtime_ns
    fast = runtime.load_runtime(out, runtime_dir).logits(pairs)
    assert built[0].stat().st_mtime_ns == stamp
    assert fast.shape == reference.shape and np.abs(fast - reference).max() < 0.3  # int8
    changed = tmp_path / "dm"
    shutil.copytree(out, changed)
    weights = changed / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4] + b"\x00\x00\x00\x00")
    assert runtime.runtime_path(changed, runtime_dir) != runtime.runtime_path(out, runtime_dir)


def _copy_with_meta(trained: Path, tmp_path: Path, **changes: Any) -> Path:
    """A copy of the trained DM whose dm.json has `changes`."""
    folder = tmp_path / "dm"
    shutil.copytree(trained, folder)
    meta = json.loads((folder / "dm.json").read_text())
    (folder / "dm.json").write_text(json.dumps({**meta, **changes}))
    return folder


def test_the_decision_model_uses_the_trained_backend_where_listed(
    trained: tuple[Path, dict], runtime_dir: Path, tmp_path: Path
) -> None:
    folder = _copy_with_meta(trained[0], tmp_path, use_for=["rel", "same", "direct"])
    model = TrainedDM.load(folder, runtime_dir)
    assert model is not None and model.direct_fits
    dm = DecisionModel(gateway=None, embedder=None, trained=model)  # type: ignore[arg-type]
    assert [dm.backend(k) for k in ("rel", "same", "direct")] == ["trained"] * 3
    # every judgement is the trained model's own on the same texts (the LLM, with no
    # gateway, could not answer)
    q = "Who directed Raise Your Voice?"
    passages = [{"id": i, "title": t.split(":")[0], "text": t} for i, t in PASSAGES.items()]
    texts = [passage_text(p["title"], p["text"]) for p in passages]
    scores = dm.p_rel(q, [*passages, {"id": 9, "title": "E", "text": " "}])
    assert scores == pytest.approx([*model.p("rel", [(q, t) for t in texts]), 0.0], abs=1e-6)
    same = ("Who directed X?", "Who is the director of X?")
    assert dm.p_same(*same) == pytest.approx(model.p("same", [same])[0], abs=1e-6)
    for retrieval in ([0.032, 0.002, 9.5], None):  # the top w, and text gathered otherwise
        expected = model.p_direct(q, texts, retrieval)
        assert dm.p_direct(q, passages, retrieval) == pytest.approx(expected, abs=1e-6)


def test_the_depth_decision_is_the_depth_models(
    trained: tuple[Path, dict], runtime_dir: Path, tmp_path: Path
) -> None:
    """Depth is served by the fitted model over embedding and logit; a DM calibrated
    without one (an older dm.json) serves the adapter's calibrated logit alone."""
    questions = ["Who directed Raise Your Voice?", "When did the capital of X's birthplace fall?"]
    dm = TrainedDM.load(trained[0], runtime_dir)
    assert dm is not None
    served = dm.p("depth", [(q, "") for q in questions])
    assert served == dm.p_shallow(questions)
    features = dm_features.depth_inputs(dm.encoders["depth"], dm.embedder, questions)
    *weights, bias = trained[1]["depth_model"]["weights"]
    expected = 1 / (1 + np.exp(-(features @ np.array(weights) + bias)))
    assert np.allclose(served, expected)
    older = TrainedDM.load(_copy_with_meta(trained[0], tmp_path, depth_model={}), runtime_dir)
    logits = dm.encoders["depth"].logits([("depth", q, "") for q in questions])
    platt = Platt(**trained[1]["platt"]["depth"])
    assert older.p("depth", [(q, "") for q in questions]) == [platt(float(x)) for x in logits]  # type: ignore[union-attr]


def test_depth_rows_weigh_extra_hotpotqa_and_deep_questions() -> None:
    rows = [
        DMExample("depth", "q1", "", 1, "gold-hops", "musique", "a"),
        DMExample("depth", "q2", "", 0, "gold-hops", "musique", "b"),
        DMExample("depth", "q3", "", 1, "gold-hops", "extra_train/hotpotqa", "c"),
    ]
    weights = train.depth_weights(rows).tolist()
    assert weights == [1.0, train.DEPTH_DEEP_WEIGHT, train.DEPTH_EXTRA_WEIGHT]
    assert train.fit_depth(None, None, rows[:1]) == {}  # one label: nothing to fit
    # A row of weight 2 counts as that row twice.
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(40, 3)), (rng.random(40) > 0.5).astype(float)
    weighted = train.fit_logistic(x, y, 1.0, np.where(np.arange(40) < 5, 2.0, 1.0))
    doubled = train.fit_logistic(np.vstack([x, x[:5]]), np.concatenate([y, y[:5]]), 1.0)
    assert np.allclose(weighted, doubled)


def test_a_damaged_adapter_falls_back_with_a_warning_naming_it(
    trained: tuple[Path, dict], runtime_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "dm"
    shutil.copytree(trained[0], folder)
    (folder / "adapter_model.safetensors").write_bytes(b"not a tensor file")
    with pytest.warns(UserWarning, match=str(folder)):
        assert TrainedDM.load(folder, runtime_dir) is None
    assert TrainedDM.load(tmp_path / "nothing-here", runtime_dir) is None  # never trained: silent


def test_a_refit_keeps_what_the_evaluation_chose_to_serve(
    trained: tuple[Path, dict], runtime_dir: Path, tmp_path: Path
) -> None:
    assert "use_for" not in trained[1]  # a new adapter serves nothing until evaluated
    folder = _copy_with_meta(trained[0], tmp_path, use_for=["rel", "suff"])
    data = tmp_path / "data"
    write_jsonl(data / "train.jsonl", _examples())
    write_jsonl(data / "calib.jsonl", _examples())
    meta = train.calibrate(
        data, folder, runtime_dir, lambda _b, ids: [PASSAGES[i] for i in ids], progress=False
    )
    assert meta["use_for"] == ["rel", "suff"]
    assert TrainedDM.load(folder, runtime_dir).use_for == {"rel", "suff"}  # type: ignore[union-attr]


def test_one_adapter_retrains_alone_and_the_others_are_kept(
    trained: tuple[Path, dict], runtime_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "dm"
    shutil.copytree(trained[0], folder)
    served = {**json.loads((folder / "dm.json").read_text()), "use_for": ["rel", "same"]}
    (folder / "dm.json").write_text(json.dumps(served))  # as `hoprag dm eval` leaves it
    main_weights = (folder / "adapter_model.safetensors").read_bytes()
    data = tmp_path / "data"
    write_jsonl(data / "calib.jsonl", _examples())
    same_rows = [e for e in _examples() if e.kind == "same"]
    write_jsonl(data / "train.jsonl", [*_examples(), *same_rows])  # the same pairs changed
    passages = lambda _b, ids: [PASSAGES[i] for i in ids]  # noqa: E731
    meta = train.train(data, folder, runtime_dir, passages, only="same")
    assert (folder / "adapter_model.safetensors").read_bytes() == main_weights
    assert meta["adapters"]["same"]["train_examples"] == 2 * len(same_rows)
    assert meta["adapters"]["main"] == trained[1]["adapters"]["main"]
    # what the main adapter feeds is kept as fitted, and so is what the DM serves
    for fitted in ("direct", "direct_gathered", "question_rel", "depth_model"):
        assert meta[fitted] == trained[1][fitted]
    assert {k: v for k, v in meta["platt"].items() if k != "same"} == {
        k: v for k, v in trained[1]["platt"].items() if k != "same"
    }
    assert meta["use_for"] == ["rel", "same"]
    assert TrainedDM.load(folder, runtime_dir) is not None
    with pytest.raises(UserError, match="no DM adapter called 'nli'"):
        train.train(data, folder, runtime_dir, passages, only="nli")
    lone = tmp_path / "lone"
    with pytest.raises(UserError, match="no trained main adapter"):
        train.train(data, lone, runtime_dir, passages, only="same")
    write_jsonl(data / "train.jsonl", [e for e in _examples() if e.kind != "same"])
    with pytest.raises(UserError, match="no training examples for the same adapter"):
        train.train(data, folder, runtime_dir, passages, only="same")
    assert (folder / "dm.json").is_file()  # refused before anything was touched


def test_length_buckets_use_every_example_once_in_batches_of_similar_length() -> None:
    rows = [DMExample("rel", "q", "w " * n, n % 2, "how", "t", str(n)) for n in range(1, 2001)]
    batches = train.length_buckets(rows, 16)
    assert sorted(e.question_id for b in batches for e in b) == sorted(e.question_id for e in rows)
    assert all(len(b) <= 16 for b in batches) and len(batches) <= 2000 // 16 + 3
    # A random batch of these spans about 3,000 characters; a bucketed one about 80.
    spread = [max(len(e.text_b) for e in b) - min(len(e.text_b) for e in b) for b in batches]
    assert np.median(spread) < 300


def test_a_half_trained_dm_is_never_served(
    trained: tuple[Path, dict], runtime_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "dm"
    shutil.copytree(trained[0], folder)
    (folder / "dm.json").unlink()  # training saved the adapter, calibration never ran
    assert (folder / "training.json").is_file()
    assert TrainedDM.load(folder, runtime_dir) is None


def test_direct_features_carry_relevance_over_title_links() -> None:
    question = "Where was the director of Raise Your Voice born?"
    passages = [
        "Raise Your Voice: a 2004 film directed by Sean McNamara.",
        "Sean McNamara (director): an American director born in Burbank.",
        "Burbank Studios: a film studio.",
    ]
    features = dict(
        zip(
            dm_features.DIRECT_FEATURES,
            dm_features.direct_features(question, passages, [0.9, 0.2, 0.1], 0.8, [0.9, 0.6, 0.1]),
            strict=True,
        )
    )
    # the second hop's passage is named (without its "(director)") in the first one
    assert features["linked relevance, rank 1"] == pytest.approx(0.9)
    assert features["linked relevance, rank 2"] == 0.0
    assert [features[f"reached relevance, rank {k}"] for k in (1, 2)] == pytest.approx([0.9, 0.9])
    assert [features[f"relevance, rank {k}"] for k in (1, 2)] == pytest.approx([0.9, 0.2])
    assert features["titles named in the question"] == 1.0
    assert features["p(at most two hops)"] == 0.8
    assert [features[f"whole-question relevance, rank {k}"] for k in (1, 2)] == [0.9, 0.6]
    assert features["passages relevant to the whole question"] == 2.0


def test_the_direct_model_says_what_a_linear_one_cannot() -> None:
    # "yes" only when exactly one of two features is high: no linear model can say it,
    # the product of the two can
    rng = np.random.default_rng(0)
    x = rng.random((400, len(dm_features.DIRECT_FEATURES)))
    y = ((x[:, 0] > 0.5) != (x[:, 6] > 0.5)).astype(float)
    model = train.fit_direct(x[:300], y[:300], dm_features.DIRECT_FEATURES)
    p = [dm_features.direct_probability(model, row) for row in x[300:]]
    assert dm_eval.auc(p, y[300:].tolist()) > 0.9
    *weights, bias = train.fit_logistic(x[:300], y[:300])
    linear = [float(np.dot(weights, row)) + bias for row in x[300:]]
    assert dm_eval.auc(linear, y[300:].tolist()) < 0.7


@pytest.mark.parametrize(
    "old_direct",
    [
        {"features": 5, "weights": [0.1] * 6},  # before title links and depth
        {"features": list(dm_features.DIRECT_FEATURES), "weights": [0.1] * 9},  # linear
        {"features": list(dm_features.DIRECT_FEATURES), "design": dm_features.DESIGN},  # no signals
    ],
)
def test_a_direct_model_fitted_on_other_features_is_not_served(
    trained: tuple[Path, dict], runtime_dir: Path, tmp_path: Path, old_direct: dict
) -> None:
    folder = _copy_with_meta(trained[0], tmp_path, use_for=["rel", "direct"], direct=old_direct)
    with pytest.warns(UserWarning, match="hoprag dm calibrate"):
        dm = TrainedDM.load(folder, runtime_dir)
    assert dm is not None and dm.use_for == {"rel"}
    assert dm.p_direct("Who directed Raise Your Voice?", list(PASSAGES.values())) == 0.0


def test_direct_examples_without_retrieval_signals_ask_for_a_rebuild() -> None:
    old = DMExample("direct", "Q?", "", 1, "gold-in-top-w", "t", "a", {"passage_ids": [1]})
    with pytest.raises(UserError, match="hoprag dm data"):
        retrieval_signals_of(old)
    new = DMExample("direct", "Q?", "", 1, "gold-in-top-w", "t", "a", _examples()[-1].extra)
    assert retrieval_signals_of(new) == [0.030, 0.0, 2.1]


def test_question_rel_features_reach_a_bridge_passage_through_title_links() -> None:
    question = "Where was the director of Raise Your Voice born?"
    passages = [
        "Raise Your Voice: a 2004 film directed by Sean McNamara.",
        "Sean McNamara (director): an American director born in Burbank.",
        "Burbank: a city in California.",
        "Basalt: a volcanic rock.",
    ]
    rows = dm_features.question_rel_features(question, passages, [0.9, 0.2, 0.3, 0.1])
    assert rows.shape == (4, len(dm_features.QUESTION_REL_FEATURES))
    features = [dict(zip(dm_features.QUESTION_REL_FEATURES, r, strict=True)) for r in rows]
    film, director, city, rock = features
    assert film["relevance (logit)"] == pytest.approx(np.log(0.9 / 0.1))
    # the director's passage is named in the film's; the city in the director's
    assert director["relevance of a passage naming its title"] == pytest.approx(0.9)
    assert film["relevance of a passage it names by title"] == pytest.approx(0.2)
    assert city["relevance of a passage naming its title"] == pytest.approx(0.2)
    assert city["reached relevance of a passage naming its title"] == pytest.approx(0.9)
    assert (
        film["its title named in the question"] == 1.0
        and director["named by a passage whose title the question names"] == 1.0
    )
    assert rock["relevance of a passage naming its title"] == 0.0
    assert [f["best relevance in the batch"] for f in features] == pytest.approx([0.9] * 4)
    assert [f["second-best relevance in the batch"] for f in features] == pytest.approx([0.3] * 4)
    assert dm_features.question_rel_features(question, [], []).shape == (0, rows.shape[1])


def test_a_whole_question_judgement_sees_the_questions_top_passages() -> None:
    ex = DMExample("rel", "Q?", PASSAGES[2], 1, "gold-passage", "t", "a", {"query": "question"})
    texts = lambda _b, ids: [PASSAGES[i] for i in ids]  # noqa: E731
    assert question_batch(ex, {("t", "a"): [1, 3]}, texts) == (
        [PASSAGES[1], PASSAGES[3], PASSAGES[2]],
        2,
    )
    assert question_batch(ex, {("t", "a"): [2, 3]}, texts) == (
        [PASSAGES[2], PASSAGES[3]],
        0,
    )
    assert question_batch(ex, {}, texts) == ([PASSAGES[2]], 0)
    assert question_contexts(_examples()) == {("t", "a"): [1, 3], ("t", "b"): [3]}
    assert is_question_rel(ex) and not is_question_rel(_examples()[0])


def test_whole_question_relevance_uses_its_model_and_falls_back_without_one(
    trained: tuple[Path, dict], runtime_dir: Path, tmp_path: Path
) -> None:
    question = "Who directed Raise Your Voice?"
    passages = [{"id": i, "title": t.split(":")[0], "text": t} for i, t in PASSAGES.items()]
    dm = TrainedDM.load(trained[0], runtime_dir)
    assert dm is not None and dm.question_rel_fits
    model = DecisionModel(gateway=None, embedder=None, trained=dm)  # type: ignore[arg-type]
    model.trained.use_for = {"rel"}  # type: ignore[union-attr]
    per_passage = model.p_rel(question, passages)
    whole = model.p_rel(
        question, [*passages, {"id": 9, "title": "E", "text": ""}], whole_question=True
    )
    assert len(whole) == 4 and whole[3] == 0.0 and all(0.0 <= p <= 1.0 for p in whole)
    assert whole[:3] != pytest.approx(per_passage)
    older = _copy_with_meta(trained[0], tmp_path, use_for=["rel"], question_rel={})
    model = DecisionModel(gateway=None, embedder=None, trained=TrainedDM.load(older, runtime_dir))  # type: ignore[arg-type]
    assert model.p_rel(question, passages, whole_question=True) == pytest.approx(per_passage)


def test_no_whole_question_examples_fit_no_model(
    runtime_dir: Path, trained: tuple[Path, dict]
) -> None:
    calib = [e for e in _examples() if not is_question_rel(e)]
    encoder = runtime.load_runtime(trained[0], runtime_dir)
    fitted = train.fit_question_rel(encoder, trained[1]["platt"], calib, lambda _b, ids: [], False)
    assert fitted == {} and not dm_features.fits(fitted, dm_features.QUESTION_REL_FEATURES)
