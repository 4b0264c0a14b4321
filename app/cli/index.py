"""`hoprag index` (build and manage indexes), `hoprag graph` (an index's sentence graph)
and `hoprag cache` (an index's shared QA cache).

Command bodies import what loads models, stores or the graph (chromadb, langchain,
langgraph, onnxruntime, torch) when they run, so that `hoprag --help` and light
commands start in a fraction of a second.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from app.checks import list_indexes, require_index
from app.cli.common import DefaultCommandGroup, IndexOpt, load_settings, print_table
from app.errors import UserError

index_app = typer.Typer(
    cls=DefaultCommandGroup,
    no_args_is_help=True,
    help="Index a corpus (`hoprag index PATH --name NAME`) and manage indexes.\n\n"
    "PATH is a JSON list of {title, text}, a JSONL file with those fields, or a document "
    "(PDF, HTML, Word .docx, Markdown, text) or folder of them, split into passages by "
    "headings and pages, then by size. Re-indexing an unchanged corpus does nothing; "
    "changed passages are analysed again, the others reused.",
)


@index_app.command("build")
def index_build(
    path: Annotated[Path, typer.Argument(help="Corpus file or folder.")],
    name: Annotated[str, typer.Option("--name", "-n", help="Index name.")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Index a corpus (also reachable as `hoprag index PATH --name NAME`)."""
    from app.index.indexing import build_index  # lazy: chromadb, spaCy
    from app.index.qa_store import open_store

    settings = load_settings()
    report = build_index(settings, path, name, progress=not quiet)
    if report.status == "unchanged":
        typer.echo(f"index {name!r} is up to date ({report.passages} passages); nothing to do")
        return
    typer.echo(
        f"index {name!r} {report.status}: {report.passages} passages "
        f"({report.new_passages} new, {report.reused_passages} reused), "
        f"{report.sentences} sentences, {report.entities} entities -> {report.path}"
    )
    # The QA cache's entries of the old corpus die with their passages (the rows alone:
    # no index to verify, no embedder to load).
    store = open_store(settings, name)
    store.prune(report.fingerprint)
    store.close()


@index_app.command("list")
def index_list() -> None:
    """List the indexes in HOPRAG_HOME."""
    from app.index.store import CorpusIndex  # lazy: chromadb

    settings = load_settings()
    rows = []
    for name in list_indexes(settings):
        index = CorpusIndex.open(settings, name)
        m = index.manifest
        rows.append(
            {
                "name": name,
                "passages": m["passages"],
                "sentences": m["sentences"],
                "entities": m["entities"],
                "built": m["built_at"][:19],
                "source": m["source"],
            }
        )
        index.close()
    if not rows:
        typer.echo(
            f"no indexes in {settings.indexes_dir} (build one with `hoprag index PATH --name NAME`)"
        )
        return
    print_table(rows, ["name", "passages", "sentences", "entities", "built", "source"])


@index_app.command("show")
def index_show(name: Annotated[str, typer.Argument(help="Index name.")]) -> None:
    """Print an index's manifest (counts, fingerprint, models, build timings)."""
    from app.index.store import CorpusIndex  # lazy: chromadb

    settings = load_settings()
    require_index(settings, name)

    index = CorpusIndex.open(settings, name)
    typer.echo(json.dumps(index.manifest, indent=2))
    index.close()


@index_app.command("drop")
def index_drop(
    name: Annotated[str, typer.Argument(help="Index name.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Delete an index."""
    from app.index.store import drop_index  # lazy: chromadb

    if not yes and sys.stdin.isatty():
        typer.confirm(f"delete index {name!r}?", abort=True)
    typer.echo(f"deleted {drop_index(load_settings(), name)}")


graph_app = typer.Typer(help="The sentence graph of an index (ChainRAG).", no_args_is_help=True)


@graph_app.command("build")
def graph_build(
    index: Annotated[str, typer.Option("--index", "-i", help="Index name.")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """(Re)build an index's sentence graph; `hoprag index` builds it too."""
    # lazy: chromadb, onnxruntime, scipy
    from app.encoders.embeddings import Embedder
    from app.index.graph_build import build_sentence_graph, previous_vectors
    from app.index.store import CorpusIndex, seal
    from app.index.versions import copy_version, name_lock, new_version, settle

    settings = load_settings()
    require_index(settings, index)
    root = settings.indexes_dir
    with name_lock(root, index):  # a new version of the index, like `hoprag index` writes
        settle(root, index)
        corpus = CorpusIndex.open(settings, index)  # the manifest as the lock holder sees it
        current, manifest = corpus.path, corpus.manifest
        corpus.close()
        with new_version(root, index) as version:
            copy_version(current, version)
            report = build_sentence_graph(
                version,
                Embedder(settings.runtime_dir),
                progress=not quiet,
                reuse=previous_vectors(current),
            )
            manifest["graph_edges"] = report["edges"]
            seal(version, manifest)
            (version / "manifest.json").write_text(json.dumps(manifest, indent=2))
    typer.echo(json.dumps(report, indent=2))


@graph_app.command("stats")
def graph_stats(
    index: Annotated[str, typer.Option("--index", "-i", help="Index name.")],
) -> None:
    """Load an index's sentence graph as every run does; its size and load seconds."""
    # lazy: chromadb, scipy, langchain
    from app.index.store import CorpusIndex
    from tools.sentence_graph import SentenceGraph

    corpus = CorpusIndex.open(load_settings(), index)
    try:
        started = time.perf_counter()
        # Loading needs no model: the embedder and DM are used by queries only.
        graph = SentenceGraph.open(corpus, embedder=None, dm=None)
        seconds = time.perf_counter() - started
        if graph is None:
            raise UserError(
                f"index {index!r} has no sentence graph",
                hint=f"hoprag graph build --index {index}",
            )
        report = {
            "index": index,
            "sentences": len(graph),
            "edges": graph.edge_counts(),
            "load_seconds": round(seconds, 3),
        }
    finally:
        corpus.close()
    typer.echo(json.dumps(report, indent=2))


cache_app = typer.Typer(help="The shared QA cache of an index.", no_args_is_help=True)


def _open_cache(index: str | None) -> Any:
    """The QA cache of an index (the default index without a name), at its current
    corpus version."""
    # lazy: chromadb, onnxruntime
    from app.encoders.embeddings import Embedder
    from app.index.store import CorpusIndex
    from tools.qa_cache import QACache

    settings = load_settings(index=index)
    require_index(settings, settings.index)
    opened = CorpusIndex.open(settings, settings.index)
    fingerprint = opened.manifest["fingerprint"]
    opened.close()
    return QACache.open(settings, settings.index, fingerprint, Embedder(settings.runtime_dir))


@cache_app.command("stats")
def cache_stats(index: IndexOpt = None) -> None:
    """Entries, lookups and hit rate of an index's QA cache."""
    cache = _open_cache(index)
    typer.echo(json.dumps(cache.stats(), indent=2))
    cache.close()


@cache_app.command("forget")
def cache_forget(
    passage: Annotated[list[int], typer.Option("--passage", "-p", help="Passage id (repeatable).")],
    index: IndexOpt = None,
) -> None:
    """Delete the entries answered from these passages, say one found hostile or wrong
    (ids as `hoprag ask --show-passages` and `hoprag trace` print them)."""
    cache = _open_cache(index)
    removed = sum(cache.forget_passage(pid) for pid in passage)
    typer.echo(f"removed {removed} entries answered from passage {', '.join(map(str, passage))}")
    cache.close()


@cache_app.command("clear")
def cache_clear(
    index: IndexOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Delete every entry and lookup record of an index's QA cache."""
    if not yes and sys.stdin.isatty():
        typer.confirm("clear the QA cache?", abort=True)
    cache = _open_cache(index)
    typer.echo(f"removed {cache.clear()} entries from {cache.where}")
    cache.close()
