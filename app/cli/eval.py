"""`hoprag eval`: run a system over a benchmark, compare two runs, write a report.

Command bodies import what loads models, stores or the graph (chromadb, langchain,
langgraph, onnxruntime, torch) when they run, so that `hoprag --help` and light
commands start in a fraction of a second.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from app.cli.common import DefaultCommandGroup, ModelOpt, load_settings, print_table

eval_app = typer.Typer(
    cls=DefaultCommandGroup,
    no_args_is_help=True,
    help="Evaluate systems on a benchmark (`hoprag eval --data Q.json ...`), compare runs, "
    "and write a report.",
)


@eval_app.command("run")
def eval_run(
    data: Annotated[Path, typer.Option(help="Questions file (our benchmark format).")],
    system: Annotated[
        str, typer.Option(help="closed_book, vanilla, oracle, iterative, deft or chainrag.")
    ],
    out: Annotated[Path, typer.Option(help="Run folder (resumed if it holds this run).")],
    corpus: Annotated[
        Path | None, typer.Option(help="Corpus file; indexed if needed (or give --index).")
    ] = None,
    index: Annotated[str | None, typer.Option(help="An existing index.")] = None,
    split: Annotated[str | None, typer.Option(help="Only questions of this split.")] = None,
    offset: Annotated[
        int, typer.Option(min=0, help="Skip the first N questions (after --split and --ids).")
    ] = 0,
    limit: Annotated[
        int | None, typer.Option(min=1, help="First N questions (after --offset).")
    ] = None,
    ids: Annotated[Path | None, typer.Option(help="File of question ids to run.")] = None,
    model: ModelOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Run one system over a benchmark; results stream to OUT/results.jsonl."""
    from app.eval.run import run_eval  # lazy: the models and the graph

    summary = run_eval(
        load_settings(model=model),
        data=data,
        system=system,
        out=out,
        corpus=corpus,
        index=index,
        split=split,
        offset=offset,
        limit=limit,
        ids_file=ids,
        progress=not quiet,
    )
    typer.echo(json.dumps({"judge": summary["judge"], **summary["all"]}, indent=2))


@eval_app.command("compare")
def eval_compare(
    run_a: Annotated[Path, typer.Argument(help="First run folder.")],
    run_b: Annotated[Path, typer.Argument(help="Second run folder.")],
) -> None:
    """Per-metric differences on shared questions, McNemar's exact test on EM and judged."""
    from app.eval.report import compare_runs  # lazy: langchain, matplotlib

    result = compare_runs(run_a, run_b)
    print_table(result["rows"], ["metric", "a", "b", "b_minus_a", "mcnemar_p"])
    typer.echo(f"\n{result['shared']} shared questions ({result['a']} vs {result['b']})")
    if not result["same_prompts"]:
        typer.echo("The two runs read different prompts (or one does not record its prompts).")


@eval_app.command("report")
def eval_report(
    runs: Annotated[list[Path], typer.Argument(help="Run folders.")],
    out: Annotated[Path, typer.Option(help="Output folder for report.html and PNGs.")] = Path(
        "report"
    ),
) -> None:
    """One self-contained HTML report (plus PNGs) of the given runs."""
    from app.eval.report import write_report  # lazy: langchain, matplotlib

    typer.echo(f"wrote {write_report(runs, out)}")
