"""`hoprag threads`: the checkpointed threads of `hoprag ask` (SQLite in HOPRAG_HOME, or
the Postgres database of HOPRAG_POSTGRES_URL), listed, and pruned by age."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli.common import load_settings, print_table

threads_app = typer.Typer(help="Checkpointed threads: list, prune by age.", no_args_is_help=True)


@threads_app.command("list")
def list_cmd() -> None:
    """Every thread, oldest first: when it last ran, its system and index."""
    from app.checkpoints import list_threads, open_checkpointer  # lazy: langgraph

    with open_checkpointer(load_settings()) as saver:
        threads = list_threads(saver)
    if not threads:
        typer.echo("no threads")
        return
    rows = [
        {
            "thread": t.thread_id,
            "last_run": t.last.isoformat(timespec="seconds"),
            "system": t.metadata.get("system", "?"),
            "index": t.metadata.get("index", "?"),
        }
        for t in threads
    ]
    print_table(rows, ["thread", "last_run", "system", "index"])


@threads_app.command("prune")
def prune_cmd(
    older_than: Annotated[
        float,
        typer.Option(
            "--older-than",
            metavar="DAYS",
            help="Delete threads whose last run is older than this many days.",
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Name the threads, delete nothing.")
    ] = False,
) -> None:
    """Delete the checkpoints (with their writes and blobs) of old threads."""
    from app.checkpoints import check_retention_days, open_checkpointer, prune_threads

    check_retention_days(older_than, "--older-than")
    with open_checkpointer(load_settings()) as saver:
        pruned = prune_threads(saver, older_than, dry_run=dry_run)
    for thread in pruned:
        typer.echo(f"  {thread.thread_id}  last run {thread.last.isoformat(timespec='seconds')}")
    verb = "would delete" if dry_run else "deleted"
    typer.echo(f"{verb} {len(pruned)} thread(s) older than {older_than:g} days")
