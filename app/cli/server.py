"""`hoprag serve`: every graph of langgraph.json behind an Agent Protocol server, for chat
clients (`langgraph_sdk`) and LangGraph Studio.

Two engines, one set of graphs, auth hook and HTTP checks (graph/server.py, auth.py,
webapp.py):

- development (default): `langgraph dev`, LangGraph's in-memory server, with Studio;
  threads live in the process and its `.langgraph_api/` files;
- production (`--production`): Aegra (aegra-api, docs/decisions.md), whose threads,
  runs and checkpoints live in PostgreSQL, so that any replica serves any thread and a
  restart loses none. HOPRAG_POSTGRES_URL names the database; without it the server
  starts a PostgreSQL cluster of its own, kept in HOPRAG_HOME.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from app.checks import require_index
from app.cli.common import load_settings
from app.errors import UserError
from app.postgres import cluster_folder, connect, local_cluster
from app.settings import EXPOSED_HEADERS, LOOPBACK_HOSTS, STUDIO_ORIGIN, Settings
from app.tokens import load_tokens

SOURCE = Path(__file__).resolve().parents[2]  # the checkout holding langgraph.json


def serve(
    reload: Annotated[bool, typer.Option(help="Restart on code changes.")] = False,
    production: Annotated[
        bool,
        typer.Option(
            "--production",
            help="Aegra on PostgreSQL (HOPRAG_POSTGRES_URL, else a cluster of its own): "
            "threads survive restarts and any replica serves any thread.",
        ),
    ] = False,
) -> None:
    """Serve every graph of langgraph.json on HOPRAG_HOST:HOPRAG_PORT (loopback; any
    other interface only with API tokens): `langgraph dev` (chat, Studio, SDK), or with
    --production Aegra on PostgreSQL. Offline unless you turn tracing on."""
    settings = load_settings()
    config = SOURCE / "langgraph.json"
    if not config.is_file():
        raise UserError(
            "`hoprag serve` needs a source checkout (langgraph.json)",
            hint='pip install -e ".[dev]" in the repository',
        )
    tokens = load_tokens(settings)  # a malformed tokens file: one line here, not a crash
    if settings.host not in LOOPBACK_HOSTS and not tokens:
        raise UserError(
            f"serving on {settings.host} without auth is refused: anyone who reaches it "
            "could run graphs and read threads",
            hint="set HOPRAG_API_TOKENS_FILE (docs/guide.md, 'Exposing the server'), "
            "or serve on 127.0.0.1",
        )
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": os.environ.get("LANGSMITH_TRACING", "false"),
    }
    if production:
        _serve_production(settings, config, env)
    _serve_development(settings, config, env, reload)


def _announce(settings: Settings) -> None:
    origins = ", ".join(sorted(settings.allowed_origins))
    typer.echo(
        f"browser pages of {origins} may call it"
        if origins
        else f"no browser page may call it; Studio needs HOPRAG_CORS_ORIGINS={STUDIO_ORIGIN}",
        err=True,
    )
    typer.echo(f"serving on http://{settings.host}:{settings.port} (Ctrl-C stops)", err=True)


def _serve_development(
    settings: Settings, config: Path, env: dict[str, str], reload: bool
) -> NoReturn:
    langgraph = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    if langgraph is None:
        raise UserError(
            "`hoprag serve` needs langgraph-cli", hint='pip install -e ".[dev]" in the repository'
        )
    if settings.thread_retention_days:
        _apply_retention(settings)
    args = [
        langgraph,
        "dev",
        "--no-browser",
        "--host",
        settings.host,
        "--port",
        str(settings.port),
        "--config",
        str(config),
        "--n-jobs-per-worker",
        str(settings.jobs),
        *([] if reload else ["--no-reload"]),
    ]
    _announce(settings)
    os.chdir(config.parent)
    os.execve(langgraph, args, env)


def _apply_retention(settings: Settings) -> None:
    """HOPRAG_THREAD_RETENTION_DAYS: threads of `hoprag ask` idle for longer are deleted
    from the checkpointer (SQLite or Postgres) before the server starts."""
    from app.checkpoints import open_checkpointer, prune_threads  # lazy: langgraph

    days = settings.thread_retention_days
    with open_checkpointer(settings) as saver:
        pruned = prune_threads(saver, days)
    typer.echo(f"retention: deleted {len(pruned)} thread(s) idle for over {days:g} days", err=True)


def aegra_config(settings: Settings, config: Path) -> dict[str, Any]:
    """langgraph.json as Aegra reads it: absolute paths (it resolves them from its config
    file's folder), and CORS for HOPRAG_CORS_ORIGINS alone (Aegra's default is every
    origin)."""

    def absolute(spec: str) -> str:
        path, _, export = spec.partition(":")
        return f"{(config.parent / path).resolve()}:{export}"

    spec = json.loads(config.read_text())
    return {
        "dependencies": [str(config.parent.resolve())],
        "graphs": {name: absolute(path) for name, path in spec["graphs"].items()},
        "auth": {"path": absolute(spec["auth"]["path"])},
        "http": {
            "app": absolute(spec["http"]["app"]),
            "cors": {
                "allow_origins": sorted(settings.allowed_origins),
                "allow_credentials": True,
                "expose_headers": EXPOSED_HEADERS,
            },
        },
    }


def _serve_production(settings: Settings, config: Path, env: dict[str, str]) -> NoReturn:
    """Aegra under uvicorn. Its graphs are built once per process, for HOPRAG_INDEX, so a
    run that names another index is refused (graph/webapp.py, HOPRAG_PRODUCTION), and
    the runs of a replica that stopped are marked failed (graph/replicas.py)."""
    if importlib.util.find_spec("aegra_api") is None:
        raise UserError(
            "`hoprag serve --production` needs aegra-api", hint='pip install -e ".[dev]"'
        )
    if settings.thread_retention_days:
        raise UserError(
            "HOPRAG_THREAD_RETENTION_DAYS is not applied by the production server",
            hint="unset it; `hoprag serve` (development) applies it",
        )
    if settings.postgres_url:  # one clear line now, rather than Aegra's log at start-up
        connect(settings.postgres_url, "server").close()
    require_index(settings, settings.index)  # the one index it serves: checked now
    folder = settings.home / "server"
    folder.mkdir(parents=True, exist_ok=True)
    aegra_json = folder / "aegra.json"
    aegra_json.write_text(json.dumps(aegra_config(settings, config), indent=2) + "\n")
    env |= {
        "AEGRA_CONFIG": str(aegra_json),
        "HOPRAG_PRODUCTION": "true",
        "OTEL_SDK_DISABLED": "true",
        "LOG_LEVEL": os.environ.get("LOG_LEVEL", "WARNING"),
    }
    args = [sys.executable, "-m", "uvicorn", "aegra_api.main:app", "--host", settings.host,
            "--port", str(settings.port), "--no-access-log"]  # fmt: skip
    _announce(settings)
    if settings.postgres_url:
        env["DATABASE_URL"] = settings.postgres_url
        os.chdir(folder)
        os.execve(sys.executable, args, env)
    # SIGTERM (a service manager, a test) ends the block too, so the cluster is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    with local_cluster(cluster_folder(settings.home)) as url:
        typer.echo(f"PostgreSQL of its own: {url}", err=True)
        env |= {"DATABASE_URL": url, "HOPRAG_POSTGRES_URL": url}
        code = subprocess.run(args, env=env, cwd=folder).returncode
    sys.exit(code)
