"""The sentence graph: built with the index, loaded without recomputation, typed edges
that follow the rules, tools that find the bridge sentence, and awkward corpora that
build a smaller graph instead of failing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from stubs import Runtime

from app.index.graph_build import (
    GRAPH_FILE,
    VECTORS_FILE,
    adjacency_edges,
    entity_edges,
    key_entities,
)
from app.index.indexing import build_index
from app.index.store import CorpusIndex
from app.settings import Settings
from graph.deft import route_after_filter
from nodes.expand import expand_from_graph
from tests.conftest import assert_user_error, run_cli
from tools.decision import DecisionModel
from tools.sentence_graph import SentenceGraph


def _graph(settings: Settings, name: str, embedder, ner, trained=None) -> SentenceGraph:
    index = CorpusIndex.open(settings, name)
    dm = DecisionModel(None, embedder, index=index, trained=trained)  # type: ignore[arg-type]
    graph = SentenceGraph.open(index, embedder, dm)
    assert graph is not None
    graph._ner = ner
    return graph


def test_the_index_build_writes_the_graph(
    settings: Settings, sample_index: str, embedder, ner
) -> None:
    index = CorpusIndex.open(settings, sample_index)
    assert (index.path / GRAPH_FILE).is_file() and (index.path / VECTORS_FILE).is_file()
    counts = index.manifest["graph_edges"]
    assert set(counts) == {"entity", "semantic", "adjacent"} and all(counts.values())
    graph = _graph(settings, sample_index, embedder, ner)
    assert graph.edge_counts() == counts
    assert len(graph) == index.manifest["sentences"]
    for matrix in graph.edges.values():  # undirected, no self-loops
        assert (matrix != matrix.T).nnz == 0 and not matrix.diagonal().any()


def test_graph_stats_loads_the_stored_graph_without_models(
    settings: Settings, sample_index: str, home: Path
) -> None:
    proc = run_cli("graph", "stats", "--index", sample_index, home=home)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    manifest = CorpusIndex.open(settings, sample_index).manifest
    assert report["edges"] == manifest["graph_edges"]
    assert report["sentences"] == manifest["sentences"] and report["load_seconds"] >= 0
    assert_user_error(run_cli("graph", "stats", "--index", "nope", home=home), "no index")


def test_edge_rules_on_hand_made_input() -> None:
    # sentence 0-3 in passage 7, sentence 4 in passage 8; window 3 keeps 0-3, not 0-4
    adjacent = adjacency_edges([(0, 7, 0), (1, 7, 1), (2, 7, 2), (3, 7, 3), (4, 8, 0)], 5)
    assert adjacent[0, 3] == pytest.approx(1 / 3) and adjacent[0, 1] == 1.0
    assert adjacent[3, 4] == 0 and adjacent[1, 0] == 1.0
    # entity 1 in sentences {0, 2}: linked; entity 2 only once: links nothing
    mentions = {1: {0, 2}, 2: {3}, 3: {0, 2}}
    edges = entity_edges(mentions, 4)
    shared = int(1 in key_entities(mentions, 4)) + int(3 in key_entities(mentions, 4))
    assert edges[0, 2] == shared > 0 and edges[0, 3] == 0


def test_tools_find_the_bridge_sentence(
    settings: Settings, sample_index: str, embedder, ner
) -> None:
    graph = _graph(settings, sample_index, embedder, ner)
    seeds = graph.seed_sentences("Where is Tavistrom College?")
    assert seeds and "Tavistrom College" in seeds[0].text
    gathered = graph.expand(seeds, "Where is Tavistrom College?", max_words=400)
    assert any("Ulden River flows through Brisk Hollow" in s.text for s in gathered)
    assert {s.hop for s in gathered} >= {0, 1}
    assert sum(len(s.text.split()) for s in gathered) <= 400 + 60  # cap, plus one sentence
    assert "Augustin Reyvald" in graph.entities(
        "Tavistrom College was founded by Augustin Reyvald."
    )
    assert any("Augustin Reyvald" in s.text for s in graph.sentences_with("Augustin Reyvald"))
    assert graph.seed_sentences("   ") == [] and graph.entities("") == []
    assert graph.sentences_with("Nobody Atall") == []
    names = {t.name for t in graph.as_tools()}
    assert names == {"seed_sentences", "expand_from_seeds", "entities", "sentences_with"}


@pytest.mark.e2e  # indexes four corpora: a quarter of a minute
def test_awkward_corpora_build_smaller_graphs(
    settings: Settings, tmp_path: Path, embedder, ner
) -> None:
    corpus = [
        {"title": "numbers", "text": "one two three four five six seven."},  # no entities
        {"title": "single", "text": "A lone sentence without a name"},
        {"title": "long", "text": " ".join(["The river runs on and on."] * 2000)},  # ~12k words
        {"title": "другой", "text": "Москва — столица России. 東京は日本の首都です。"},
    ]
    path = tmp_path / "awkward.json"
    path.write_text(json.dumps(corpus, ensure_ascii=False))
    build_index(settings, path, "awkward", progress=False, embedder=embedder, ner=ner)
    graph = _graph(settings, "awkward", embedder, ner)
    assert len(graph) > 4
    assert graph.edge_counts()["adjacent"] > 0
    seeds = graph.seed_sentences("Which river runs on?")
    assert seeds
    gathered = graph.expand(seeds, "Which river runs on?", max_words=300)
    assert sum(len(s.text.split()) for s in gathered) <= 300 + 50
    assert np.isfinite(np.asarray(graph.vectors, dtype=np.float32)).all()


def test_an_index_without_a_graph_gives_no_graph(
    settings: Settings, sample_index: str, embedder, tmp_path: Path
) -> None:
    index = CorpusIndex.open(settings, sample_index)
    copy = tmp_path / "copy"  # the index as built before sentence graphs existed
    shutil.copytree(index.path, copy, ignore=shutil.ignore_patterns(GRAPH_FILE, VECTORS_FILE))
    manifest = json.loads((copy / "manifest.json").read_text())
    for name in (GRAPH_FILE, VECTORS_FILE):
        manifest["checksums"].pop(name)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert SentenceGraph.open(CorpusIndex(copy), embedder, None) is None


def test_deft_expands_when_a_step_finds_nothing(
    settings: Settings, sample_index: str, embedder, ner, trained_dm
) -> None:
    graph = _graph(settings, sample_index, embedder, ner, trained_dm)
    runtime = Runtime(settings)
    base = {"sub_question": "Which river flows through Brisk Hollow?", "hop": 2}
    nothing = {**base, "relevant_found": False, "sub_answer": ""}
    # Nothing relevant retrieved: expand before reading, so the step reads once.
    assert route_after_filter(nothing, runtime, graph_available=True) == "expand_from_graph"
    assert route_after_filter(nothing, runtime, graph_available=False) == "select_evidence"
    off = Runtime(settings.with_overrides(graph_expansion=False))
    assert route_after_filter(nothing, off, graph_available=True) == "select_evidence"
    relevant = {**base, "relevant_found": True, "sub_answer": ""}
    assert route_after_filter(relevant, runtime, graph_available=True) == "select_evidence"

    top_retrieved = [{"id": -1, "title": "Elsewhere", "text": "Nothing about rivers."}]
    update = expand_from_graph(
        {**nothing, "kept": top_retrieved}, runtime, graph=graph, dm=graph.dm
    )
    expansion = update["expansion"]
    assert expansion["reason"].startswith("no retrieved passage")
    assert expansion["seeds"] and expansion["reached_passage_ids"]
    assert update["kept"] and any("Ulden River" in p["text"] for p in update["kept"])
    assert all(d["kind"] == "rel" for d in update["decisions"])

    # An expansion that reaches nothing relevant leaves the step's passages alone.
    elsewhere = {**nothing, "sub_question": "Which opera did Zq Vbn compose in 1820?"}
    update = expand_from_graph(
        {**elsewhere, "kept": top_retrieved}, runtime, graph=graph, dm=graph.dm
    )
    assert "kept" not in update
