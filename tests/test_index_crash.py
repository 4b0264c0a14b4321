"""Real writers killed by a real SIGKILL (the installed `hoprag`, as a child process) at
every step of writing and switching an index version: afterwards the old index or the
new one opens and passes its checks, and the next writer removes what the dead one left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from app.index.indexing import build_index
from app.index.store import CorpusIndex
from app.index.versions import PAUSE_ENV
from app.settings import Settings
from tests.conftest import HOPRAG, SAMPLE_CORPUS, run_cli

pytestmark = pytest.mark.e2e  # runs the installed CLI

NAME = "crash"
OLD, NEW = 3, 4  # passages of the sample in the old and the new corpus
POLL_S = 0.002
START_TIMEOUT_S = 120


def _corpus(folder: Path, passages: int) -> Path:
    path = folder / f"corpus-{passages}.json"
    path.write_text(json.dumps(json.loads(SAMPLE_CORPUS.read_text())[:passages]))
    return path


def _killed(home: Path, args: list[str], point: str = "") -> int:
    """Run `hoprag ARGS` and SIGKILL it where the test hook pauses it at `point`, or
    with no point, the moment its new version folder appears (while it writes it)."""
    env = {**os.environ, "HOPRAG_HOME": str(home), PAUSE_ENV: point}
    proc = subprocess.Popen(
        [HOPRAG, *args, "--quiet"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if point:
            assert proc.stderr is not None
            for line in proc.stderr:
                if line == f"paused at {point}\n":
                    break
            else:
                pytest.fail(f"hoprag {' '.join(args)} ended without pausing at {point}")
        else:
            deadline = time.monotonic() + START_TIMEOUT_S
            pattern = f".{NAME}.v-{proc.pid}-*"
            while not any((home / "indexes").glob(pattern)):
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(POLL_S)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return proc.pid


def _answers(settings: Settings) -> int:
    """The index opens and passes its checks (manifest, checksums, passage count, Chroma);
    its passage count."""
    index = CorpusIndex.open(settings, NAME)
    try:
        assert index.collection.count() == len(index)
        return len(index)
    finally:
        index.close()


def _current(root: Path) -> str | None:
    return os.readlink(root / NAME) if (root / NAME).is_symlink() else None


def _leftovers(root: Path) -> set[str]:
    """Hidden entries of the index but its lock and its current version."""
    keep = {f".{NAME}.lock", _current(root)}
    return {p.name for p in root.iterdir() if p.name.startswith(f".{NAME}.") and p.name not in keep}


def test_a_killed_writer_leaves_the_old_or_the_new_index_and_is_cleaned_up_after(
    settings: Settings, home: Path, tmp_path: Path, embedder, ner
) -> None:
    root = settings.indexes_dir
    old, new = _corpus(tmp_path, OLD), _corpus(tmp_path, NEW)
    build_index(settings, old, NAME, progress=False, embedder=embedder, ner=ner)
    version = (root / NAME).resolve()
    (root / NAME).unlink()
    version.rename(root / NAME)  # a plain folder, as hoprag wrote before versions

    index_old, index_new = ["index", str(old), "--name", NAME], ["index", str(new), "--name", NAME]
    graph = ["graph", "build", "--index", NAME]
    kills = [  # (command, where it is killed, passages of the index that answers after)
        (index_new, "written", OLD),  # the plain folder: left in place ...
        (index_new, "linked", OLD),
        (index_new, "switched", NEW),  # ... and switched out
        (index_old, "", NEW),  # a link to a version: kept while the new one is written ...
        (index_old, "linked", NEW),
        (graph, "written", NEW),
        (index_old, "switched", OLD),  # ... and switched
        (graph, "switched", OLD),
    ]
    for args, point, answer in kills:
        before = _current(root)
        pid = _killed(home, args, point)
        assert _answers(settings) == answer, (args, point)
        # Only what the dead writer made or replaced is left: the leftovers of the writer
        # killed before it were removed when it started.
        assert _leftovers(root), (args, point)
        assert all(f"-{pid}" in e or e == before for e in _leftovers(root)), (args, point)
    assert (root / NAME).is_symlink()

    done = run_cli(*index_new, "--quiet", home=home)
    assert done.returncode == 0, done.stderr
    assert _answers(settings) == NEW and _leftovers(root) == set()

    before = _current(root)
    done = run_cli(*graph, "--quiet", home=home)
    assert done.returncode == 0, done.stderr
    assert _current(root) != before  # a new version, not the live one rewritten
    assert _answers(settings) == NEW and _leftovers(root) == set()
