"""`hoprag dm`: build the decision model's examples, train, calibrate and evaluate it.

Command bodies import what loads models, stores or the graph (chromadb, langchain,
langgraph, onnxruntime, torch) when they run, so that `hoprag --help` and light
commands start in a fraction of a second.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from tqdm import tqdm

from app.checks import check_benchmarks
from app.cli.common import load_settings
from app.dm.data import build as build_examples
from app.dm.data import passage_text, read_jsonl
from app.dm.eval import EVAL_KINDS, evaluate, merged
from app.dm.features import DM_DIR
from app.errors import UserError
from app.settings import Settings

dm_app = typer.Typer(help="The trained decision model (DM).", no_args_is_help=True)


DataDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--data",
        help="Benchmark folder with musique/, 2wikimultihopqa/, hotpotqa/ "
        "(default: HOPRAG_DATA, else HOPRAG_HOME/data).",
    ),
]


DMDataOpt = Annotated[Path, typer.Option("--data", help="Folder written by `hoprag dm data`.")]


@dm_app.command("data")
def dm_data(
    data: DataDirOpt = None,
    out: Annotated[Path, typer.Option("--out", help="Where the JSONL files go.")] = Path("dm_data"),
    suff_near_misses: Annotated[
        bool,
        typer.Option(
            "--suff-near-misses",
            help="Also suff negatives with a wrong or repeated last step (not the shipped DM's).",
        ),
    ] = False,
) -> None:
    """Labelled DM examples from gold annotations: train/calib from `train`, dev from `dev`.

    Needs the benchmark indexes (named musique, 2wikimultihopqa, hotpotqa) for the hard
    negatives and the `direct` labels."""
    settings = load_settings()
    data = data or settings.data
    check_benchmarks(data)
    typer.echo(json.dumps(build_examples(data, settings, out, suff_near_misses), indent=2))
    typer.echo(f"wrote {out}/train.jsonl, calib.jsonl, dev.jsonl and counts.json")


@dm_app.command("rewordings")
def dm_rewordings(data: DataDirOpt = None) -> None:
    """Let the chat model reword each relation's question (train and dev apart) into
    app/data/dm_rewordings.json, which `hoprag dm data` reads for DM_same's pairs.

    The shipped file was made by the embedded model and reviewed by hand; a rerun drops
    the wordings that review removed (kept in the file under `removed`)."""
    from app.dm import rewordings as builder  # lazy: langchain (prompts, the gateway)
    from app.llm.gateway import LLMGateway

    settings = load_settings()
    data = data or settings.data
    check_benchmarks(data)
    gateway = LLMGateway(settings)
    try:
        rewordings = builder.build_rewordings(
            data,
            lambda messages: gateway.invoke(messages, builder.REWORDING_TOKENS),
            gateway.model_name,
            lambda pairs: tqdm(list(pairs), desc="rewording relations", unit="relation"),
            builder.read_review(),
        )
    finally:
        gateway.close()
    builder.write_rewordings(rewordings)
    counts = {split: sum(map(len, rewordings[split].values())) for split in builder.SPLITS}
    typer.echo(f"wrote {builder.REWORDINGS_FILE}: {counts} wordings")


@dm_app.command("train")
def dm_train(
    data: DMDataOpt = Path("dm_data"),
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Where the adapters go (default: the shipped app/data/dm)."),
    ] = None,
    adapter: Annotated[
        str | None,
        typer.Option(
            "--adapter",
            help="Train only this adapter (main: rel, suff, depth; same) and keep the "
            "others; main recalibrates all, same only its own kind.",
        ),
    ] = None,
    benchmarks: Annotated[
        Path | None,
        typer.Option(
            "--benchmarks",
            help="Benchmark folder for `hoprag dm data` when --data is empty "
            "(default: HOPRAG_DATA, else HOPRAG_HOME/data).",
        ),
    ] = None,
) -> None:
    """LoRA-train the MiniLM cross-encoder DM, calibrate it per kind, save it in app/data/dm.

    From scratch in one command: without examples in --data it builds them first."""
    from app.dm import train as trainer  # lazy: torch, peft

    settings = load_settings()
    if not any((data / name).is_file() for name in ("train.jsonl", "calib.jsonl", "dev.jsonl")):
        benchmarks = benchmarks or settings.data
        check_benchmarks(benchmarks)
        typer.echo(f"no DM examples in {data}: building them first (hoprag dm data)", err=True)
        typer.echo(json.dumps(build_examples(benchmarks, settings, data)), err=True)
    _require_dm_data(data, ("train.jsonl", "calib.jsonl"))
    if adapter:
        trainer.adapter_named(adapter)  # a wrong name fails before any work
    meta = trainer.train(
        data,
        out or DM_DIR,
        settings.runtime_dir,
        _benchmark_passages(settings),
        only=adapter,
    )
    typer.echo(json.dumps(meta, indent=2))


@dm_app.command("calibrate")
def dm_calibrate(
    data: DMDataOpt = Path("dm_data"),
) -> None:
    """Refit the per-kind temperatures, the `direct` and depth models and the
    whole-question relevance model of the saved adapters (for adapters trained elsewhere, e.g. by
    `bench.dm_recipes` on a GPU)."""
    from app.dm import train as trainer  # lazy: torch, peft

    _require_dm_data(data, ("train.jsonl", "calib.jsonl"))
    trainer.require_adapters(DM_DIR)
    settings = Settings()
    meta = trainer.calibrate(data, DM_DIR, settings.runtime_dir, _benchmark_passages(settings))
    typer.echo(json.dumps(meta, indent=2))


@dm_app.command("eval")
def dm_eval(
    data: DMDataOpt = Path("dm_data"),
    out: Annotated[
        Path, typer.Option("--out", help="Where dm_eval.json and the reliability PNGs go.")
    ] = Path("docs/dm_eval"),
    llm_per_kind: Annotated[
        int, typer.Option(help="Dev examples per kind for the zero-shot chat-model backend.")
    ] = 40,
    max_per_kind: Annotated[
        int, typer.Option(help="Dev examples per kind (a seeded sample) for the trained DM.")
    ] = 1500,
    dm: Annotated[
        Path | None,
        typer.Option("--dm", help="The trained DM folder (default: the shipped app/data/dm)."),
    ] = None,
    kinds: Annotated[
        str,
        typer.Option(
            help="Comma-separated kinds to evaluate; the others keep their report and "
            "whether the trained DM serves them."
        ),
    ] = ",".join(EVAL_KINDS),
) -> None:
    """AUC, accuracy, ECE and reliability diagrams on dev: trained DM vs zero-shot; the
    trained DM then serves each kind where its AUC is at least the zero-shot one."""
    asked = [k.strip() for k in kinds.split(",") if k.strip()]
    if not asked or set(asked) - set(EVAL_KINDS):
        raise UserError(
            f"--kinds {kinds!r} names no decision kind or an unknown one",
            hint=f"choose among: {', '.join(EVAL_KINDS)}",
        )
    # lazy: chromadb, langchain, onnxruntime
    from app.encoders.embeddings import Embedder
    from app.llm.gateway import LLMGateway
    from tools.decision import DecisionModel, TrainedDM

    _require_dm_data(data, ("dev.jsonl",))
    settings = Settings()
    folder = dm or DM_DIR
    trained = TrainedDM.load(folder, settings.runtime_dir)
    if trained is None:
        raise UserError(f"no trained DM in {folder}", hint="run `hoprag dm train` first")
    passages = _benchmark_passages(settings)

    gateway = LLMGateway(settings)
    try:
        zero_shot = DecisionModel(gateway, Embedder(settings.runtime_dir))
        thresholds = {
            "rel": settings.tau_rel,
            "direct": settings.tau_direct,
            "depth": settings.tau_shallow,
            "suff": settings.tau_suff,
            "same": settings.tau_same,
        }
        report = evaluate(
            read_jsonl(data / "dev.jsonl"),
            trained,
            zero_shot,
            passages,
            out,
            llm_per_kind,
            thresholds,
            max_per_kind,
            asked,
        )
    finally:
        gateway.close()
    meta = json.loads((folder / "dm.json").read_text())
    earlier = (
        json.loads((out / "dm_eval.json").read_text())
        if set(asked) != set(EVAL_KINDS) and (out / "dm_eval.json").is_file()
        else {}
    )
    report, use_for = merged(earlier, report, asked, meta.get("use_for", []))
    (folder / "dm.json").write_text(json.dumps({**meta, "use_for": use_for}, indent=2) + "\n")
    report["use_for"] = use_for
    report["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    command = (
        f"hoprag dm eval --data {data} --llm-per-kind {llm_per_kind} --max-per-kind {max_per_kind}"
        + (f" --dm {dm}" if dm else "")
        + (f" --kinds {','.join(asked)}" if set(asked) != set(EVAL_KINDS) else "")
    )
    report["command"] = [*report.get("command", []), command] if earlier else command
    report["trained_dm"] = {k: meta.get(k) for k in ("version", "recipe", "device")}
    (out / "dm_eval.json").write_text(json.dumps(report, indent=2) + "\n")
    typer.echo(json.dumps(report, indent=2))


def _benchmark_passages(settings: Settings) -> Callable[[str, list[int]], list[str]]:
    """`passages(benchmark, ids)`: "title: text" of passages of the benchmark's index
    (opened on first use), for DM examples that store passage ids."""
    from app.index.store import CorpusIndex  # lazy: chromadb

    indexes: dict[str, CorpusIndex] = {}

    def passages(benchmark: str, ids: list[int]) -> list[str]:
        if benchmark not in indexes:
            indexes[benchmark] = CorpusIndex.open(settings, benchmark)
        return [passage_text(r) for r in indexes[benchmark].passages(ids)]

    return passages


def _require_dm_data(data: Path, names: Sequence[str]) -> None:
    for name in names:
        if not (data / name).is_file():
            raise UserError(f"no {name} in {data}", hint="run `hoprag dm data` first")
