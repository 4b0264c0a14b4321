"""How the code is layered: imports point down the layers (entry points, graphs, nodes,
tools, engines), answering a question loads neither torch nor peft (the DM and the
embedder run as ONNX graphs), serving code never imports the DM's training code, and no
import cycle ties the modules together."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import DEMO_QUESTION, ROOT

PACKAGES = ("app", "graph", "nodes", "tools", "prompts")
# Import names of the libraries that answering must not load (sentence-transformers and
# transformers import torch as they load).
TORCH_STACK = ("torch", "peft", "transformers", "sentence_transformers")
# The training side: allowed to import the modules that import peft.
TRAINING_SIDE = {"app.cli.dm", "app.dm.train", "app.dm.torch_model"}
# The one lazy way from serving to torch: building a DM runtime that is missing.
EXPORT_ONLY = {("app.dm.runtime", "app.dm.torch_model")}


def _modules(packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    found = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of import nodes under `if TYPE_CHECKING:` (never run)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for n in ast.walk(node)}
    return skipped


def _imports(path: Path, modules: dict[str, Path]) -> list[tuple[str, bool]]:
    """(imported name, at module top) of every import that runs, project modules resolved
    to the deepest module named (`from app.dm import train` -> app.dm.train)."""
    tree = ast.parse(path.read_text())
    skipped = _type_checking_only(tree)
    top = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.append((full if full in modules else node.module, id(node) in top))
    return found


def _graph() -> dict[str, list[tuple[str, bool]]]:
    modules = _modules()
    return {name: _imports(path, modules) for name, path in modules.items()}


# The layers, highest first: a module may import its own layer and those below it, never
# one above. A module belongs to the layer of the longest prefix that names it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # Tests and benchmarks drive everything and ship in no package; tests may use the
    # benchmarks' helpers (bench/services.py starts servers for both), not the reverse.
    ("tests", ("tests",)),
    ("bench", ("bench",)),
    # Entry points: the CLI, the server's wiring (langgraph.json names these files), the
    # evaluation harness, and the DM's training pipelines, which build retrievers to make
    # their examples. They build graphs and tools and run them; nothing imports them.
    (
        "entry",
        (
            "app.cli",
            "app.eval",
            "graph.server",
            "graph.webapp",
            "graph.auth",
            "app.dm.train",
            "app.dm.data",
            "app.dm.eval",
            "app.dm.rewordings",
        ),
    ),
    # The graphs: each builder wires nodes to the resources (graph/resources.py opens the
    # models and stores and builds the tools) and names the edges between them.
    ("graph", ("graph",)),
    # One step of a graph each: read the state, call rules and tools, return an update.
    ("nodes", ("nodes",)),
    # The states the graphs hold, which nodes read and write: below the nodes that use
    # them, above the tools, which see only their records (tools/records.py).
    ("state", ("graph.state",)),
    # Rules, readers and the stateful tools (retriever, DM, QA cache, sentence graph),
    # used by nodes and graphs and unaware of any graph or state.
    ("tools", ("tools",)),
    # The engines and data under everything: settings, errors and input checks, the
    # corpus index and its stores, the LLM gateway, the DM's runtime, the encoders,
    # checkpoints, tokens, and the prompts (text files read as data).
    ("engines", ("app", "prompts")),
]
# Nodes import rules and tools, never each other: a helper two steps share is a tool.
NO_IMPORTS_WITHIN = {"nodes"}


def layer_of(module: str) -> str | None:
    """The layer of a project module (None for a library)."""
    named = [
        (len(prefix), name)
        for name, prefixes in LAYERS
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(named)[1] if named else None


def upward_imports(modules: dict[str, Path]) -> list[str]:
    """`file:line (layer) imports module (layer)` for every import that points up a layer,
    or from one node to another: at module top or inside a function, and under `if
    TYPE_CHECKING:` too (a type names what it depends on)."""
    rank = {name: len(LAYERS) - i for i, (name, _) in enumerate(LAYERS)}
    found = []
    for module, path in modules.items():
        here = layer_of(module)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [_resolved(node.module, alias.name, modules) for alias in node.names]
            else:
                continue
            for name in names:
                there = layer_of(name)
                if there is None or here is None:
                    continue
                within = here == there in NO_IMPORTS_WITHIN and module != name
                if rank[there] > rank[here] or within:
                    where = path.relative_to(ROOT)
                    found.append(f"{where}:{node.lineno} ({here}) imports {name} ({there})")
    return found


def _resolved(module: str, name: str, modules: dict[str, Path]) -> str:
    full = f"{module}.{name}"
    return full if full in modules else module


def test_imports_point_down_the_layers() -> None:
    modules = _modules((*PACKAGES, "bench"))
    assert layer_of("graph.state") == "state" and layer_of("graph.deft") == "graph"
    assert all(layer_of(module) for module in modules), "a module outside every layer"
    assert not upward_imports(modules)


def test_serving_code_never_imports_training_code() -> None:
    graph = _graph()
    # Training modules: those that import peft, and those that import one at their top.
    training = {m for m, imports in graph.items() if any(i == "peft" for i, _ in imports)}
    while True:
        more = {
            m for m, imports in graph.items() if any(i in training and top for i, top in imports)
        }
        if more <= training:
            break
        training |= more
    assert training, "no module imports peft: the DM trainer moved?"
    offending = [
        f"{module} imports {name}"
        for module, imports in graph.items()
        if module not in TRAINING_SIDE
        for name, _ in imports
        if name in training and (module, name) not in EXPORT_ONLY
    ]
    assert not offending


def test_no_import_cycles() -> None:
    """Module-top imports between project modules form no cycle (a package importing its
    own submodules, as `app.cli` does its command groups, is no cycle)."""
    graph = _graph()
    edges = {
        m: {i for i, top in imports if top and i in graph and not m.startswith(i + ".")}
        for m, imports in graph.items()
    }
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for nxt in sorted(edges[module]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert not cycles


@pytest.mark.e2e  # a fresh interpreter per module: about a minute
def test_every_module_imports_alone() -> None:
    """Each module imports in a fresh interpreter: no hidden order between them."""
    script = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    names = sorted(n for n in _modules() if not n.endswith("__main__"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def imports_alone(name: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-c", script, name], env=env, capture_output=True, text=True
        )
        return f"{name}: {proc.stderr.strip().splitlines()[-1]}" if proc.returncode else ""

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        failed = [line for line in pool.map(imports_alone, names) if line]
    assert not failed


def test_stop_words_match_spacy() -> None:
    """The stop-word list that spares answering a spaCy import is spaCy's own."""
    from spacy.lang.en.stop_words import STOP_WORDS

    from prompts import load_words

    assert load_words("stop_words") == STOP_WORDS


# What `hoprag ask` loads and runs before its first LLM call: the CLI, the checkpointer,
# the resources of an index (embedder, trained DM, QA cache, sentence graph) and a graph;
# then the embedder and every kind of trained-DM judgement.
ANSWERING = f"""
import json, sys
from app.settings import Settings
import app.cli, app.cli.ask
from app.checkpoints import open_checkpointer
from graph.resources import Resources
from graph.systems import build_system

settings = Settings().with_overrides(index=sys.argv[1])
with open_checkpointer(settings) as saver:
    resources = Resources.open(settings, settings.index)
    for system in ("deft", "chainrag", "vanilla"):
        build_system(system, resources, checkpointer=saver)
    dm = resources.dm.trained
    passages = ["Tavistrom College: a college in Elmbridge.", "Elmbridge: a town on the Wey."]
    question = {DEMO_QUESTION!r}
    resources.retriever.embedder.embed([question])
    dm.p("rel", [(question, p) for p in passages])
    dm.p("same", [(question, question)])
    dm.p_shallow([question])
    dm.p_question_rel(question, passages)
    dm.p_direct(question, passages, [0.1, 0.0, 2.0])
    resources.close()
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.usefixtures("trained_dm", "embedder")
def test_answering_loads_no_torch(sample_index: str, home: Path) -> None:
    """With the runtimes built (the fixtures build them, as the first run does), the
    ask path imports no torch, peft, transformers or sentence-transformers."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOPRAG_HOME": str(home)}
    env.pop("HOPRAG_TRAINED_DM", None)  # the shipped DM, as users get it
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", ANSWERING, sample_index],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not [m for m in loaded if m.split(".")[0] in TORCH_STACK]
    imported = [
        line.rsplit("|", 1)[-1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    ]
    assert "app.dm.runtime" in imported  # the trained DM was loaded
    assert not [m for m in imported if m.split(".")[0] in TORCH_STACK]
