"""The `hoprag` command line. Every user error is one clear line and a non-zero exit.

One module per command group: `models` (models and the chat server), `index` (indexes,
sentence graphs, QA caches), `ask` (ask, resume, trace), `serve`, `threads` (list, prune),
`eval` and `dm`.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import typer

from app.cli import ask
from app.cli.dm import dm_app
from app.cli.eval import eval_app
from app.cli.index import cache_app, graph_app, index_app
from app.cli.models import llm_app, models_app
from app.cli.server import serve
from app.cli.threads import threads_app
from app.errors import UserError, exit_with

HELP = """hoprag answers questions whose answer needs facts from several passages.

Typical first run: `hoprag models fetch`, `hoprag index CORPUS --name NAME`,
`hoprag ask "QUESTION" --index NAME`. Settings come from HOPRAG_* environment
variables (see README); HOPRAG_LLM_BASE_URL switches to any OpenAI-compatible endpoint.
"""


app = typer.Typer(
    help=HELP, no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False
)
app.add_typer(models_app, name="models")
app.add_typer(index_app, name="index")
app.add_typer(llm_app, name="llm")
app.add_typer(graph_app, name="graph")
app.command("ask")(ask.ask)
app.command("resume")(ask.resume)
app.command("trace")(ask.trace_thread)
app.command("serve")(serve)
app.add_typer(threads_app, name="threads")
app.add_typer(eval_app, name="eval")
app.add_typer(cache_app, name="cache")
app.add_typer(dm_app, name="dm")


def _one_line_warning(message: Warning | str, *args: Any, **kwargs: Any) -> None:
    typer.echo(f"warning: {message}", err=True)


def main() -> None:
    """Entry point: user errors become one line on stderr and an exit code."""
    warnings.showwarning = _one_line_warning
    try:
        app()
    except UserError as exc:
        exit_with(exc)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
