"""Index versions (app/index/versions.py): leftovers swept, plain folders from before
versions switched over, one lock for every writer, servers that see a rebuilt index.
The SIGKILLs of real writers are in tests/test_index_crash.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.checks import list_indexes
from app.errors import UserError
from app.index.indexing import build_index
from app.index.store import CorpusIndex, drop_index
from app.index.versions import name_lock, settle
from app.settings import Settings
from tests.conftest import ROOT, SAMPLE_CORPUS

SMALL = 4  # passages of the sample in the small corpora these tests build
LOCK_WAIT_S = 0.5  # how long a blocked writer is watched to still be waiting


def _corpus(folder: Path, passages: int) -> Path:
    """The first `passages` passages of the sample, as a corpus file."""
    path = folder / f"corpus-{passages}.json"
    path.write_text(json.dumps(json.loads(SAMPLE_CORPUS.read_text())[:passages]))
    return path


def _hidden(root: Path, name: str) -> set[str]:
    return {p.name for p in root.iterdir() if p.name.startswith(f".{name}.")}


def test_a_writer_removes_the_leftovers_of_its_name_and_nothing_else(tmp_path: Path) -> None:
    root = tmp_path / "indexes"
    keep = [".x.v-1-a", ".x.lock", ".x.v-1.v-3-c", "y", ".y.v-1-a", "x.qa_cache.sqlite"]
    gone = [".x.v-2-b", ".x.tmp-123", ".x.old-9"]
    for entry in keep + gone:
        if entry.endswith(("lock", "sqlite")):
            (root / entry).write_text("")
        else:
            (root / entry).mkdir(parents=True)
            (root / entry / "hoprag.sqlite").write_text("")
    (root / "x").symlink_to(".x.v-1-a")
    (root / ".x.link-5").symlink_to(".x.v-2-b")
    assert settle(root, "x") == root / ".x.v-1-a"
    assert sorted(p.name for p in root.iterdir()) == sorted([*keep, "x"])


def test_a_plain_folder_index_keeps_working_and_is_switched_in_one_step(
    settings: Settings, tmp_path: Path, embedder, ner
) -> None:
    root, name = settings.indexes_dir, "plain"
    build_index(
        settings, _corpus(tmp_path, SMALL), name, progress=False, embedder=embedder, ner=ner
    )
    version = (root / name).resolve()
    (root / name).unlink()
    version.rename(root / name)  # the layout of an index from before versions
    assert len(CorpusIndex.open(settings, name)) == SMALL and name in list_indexes(settings)

    report = build_index(
        settings, _corpus(tmp_path, SMALL + 1), name, progress=False, embedder=embedder, ner=ner
    )
    assert (report.status, report.reused_passages) == ("updated", SMALL)
    assert (root / name).is_symlink()
    assert _hidden(root, name) == {f".{name}.lock", os.readlink(root / name)}
    assert len(CorpusIndex.open(settings, name)) == SMALL + 1


def test_a_second_writer_says_whom_it_waits_for(settings: Settings) -> None:
    root = settings.indexes_dir
    code = (
        "from pathlib import Path; from app.index.versions import name_lock\n"
        f"with name_lock(Path({str(root)!r}), 'busy'): print('got it')"
    )
    with name_lock(root, "busy"):
        waiting = subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert waiting.stderr is not None
        line = waiting.stderr.readline().decode()
        assert waiting.poll() is None  # still waiting
    out, err = waiting.communicate(timeout=30)
    assert line == f"waiting for another hoprag index on 'busy' (pid {os.getpid()})\n"
    assert (waiting.returncode, out, err) == (0, b"got it\n", b"")


def test_drop_waits_for_the_writer_then_removes_the_index_in_one_step(
    settings: Settings,
) -> None:
    root, name = settings.indexes_dir, "dropped"
    (root / f".{name}.v-1-a").mkdir(parents=True)
    (root / name).symlink_to(f".{name}.v-1-a")
    (root / f".{name}.v-2-b").mkdir()  # a dead writer's
    (root / f"{name}.qa_cache.sqlite").write_text("")
    with name_lock(root, name):
        dropping = threading.Thread(target=drop_index, args=(settings, name))
        dropping.start()
        time.sleep(LOCK_WAIT_S)
        assert dropping.is_alive() and (root / name).is_dir()
    dropping.join(timeout=30)
    assert not os.path.lexists(root / name)
    assert _hidden(root, name) == {f".{name}.lock"}
    assert not (root / f"{name}.qa_cache.sqlite").exists()

    (root / "old-style").mkdir()  # a plain folder from before versions
    drop_index(settings, "old-style")
    assert _hidden(root, "old-style") == {".old-style.lock"}
    assert not (root / "old-style").exists()


def test_a_server_opens_a_rebuilt_or_another_index_with_the_same_models(
    settings: Settings, tmp_path: Path, embedder, ner
) -> None:
    from graph.resources import ResourcePool

    name = "served"
    build_index(
        settings, _corpus(tmp_path, SMALL), name, progress=False, embedder=embedder, ner=ner
    )
    pool = ResourcePool(settings.with_overrides(trained_dm=False))
    first = pool.get(name)
    assert pool.get(name) is first  # unchanged: nothing reopened
    build_index(
        settings, _corpus(tmp_path, SMALL + 1), name, progress=False, embedder=embedder, ner=ner
    )
    second = pool.get(name)
    assert len(first.index) == SMALL and len(second.index) == SMALL + 1
    assert second.index.path == (settings.indexes_dir / name).resolve() != first.index.path
    assert second.gateway is first.gateway
    assert second.retriever.embedder is first.retriever.embedder
    assert second.qa_cache.fingerprint == second.index.manifest["fingerprint"]
    build_index(
        settings, _corpus(tmp_path, SMALL - 1), "other", progress=False, embedder=embedder, ner=ner
    )
    other = pool.get("other")  # another index: its own stores, the process's models
    assert other.index.name == "other" and other.qa_cache is not first.qa_cache
    assert other.models == first.models
    drop_index(settings, name)
    with pytest.raises(UserError, match="no index named 'served'"):
        pool.get(name)
