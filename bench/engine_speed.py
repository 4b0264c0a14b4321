"""How fast is the embedded engine with each flag set (issue 50): prompt and generation
tokens per second on llama-server, and the sample question's time through `hoprag ask`.

    python -m bench.engine_speed [--flag-sets native cpu] [--repeats 3]

`installed` is the installed engine (`hoprag llm build`); any other name is a flag set of
app/llm/engine.py (`native` is the old default, `-march=native`), compiled once into
HOPRAG_HOME/bench/engines/NAME and smoke-run before it is measured. Each engine gets a
HOPRAG_HOME of its own that shares the models, with the sample indexed and the QA cache
off, and the engines take turns within each repeat, so that all share the machine's state.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from app.llm.cpu import NATIVE, Cpu, FlagSet, flag_sets
from app.llm.engine import (
    compile_server,
    engine_path,
    install,
    post_json,
    read_stamp,
    smoke_run,
    sources,
)
from app.llm.gateway import EmbeddedServer
from app.llm.models import require_model
from app.settings import ENGINE_CMAKE_FLAGS, Settings
from bench.common import ROOT, run_measured, save

QUESTION = "Which river flows through the town where Tavistrom College is located?"
SAMPLE = ROOT / "app" / "data" / "sample" / "corpus.json"
PROMPT_PASSAGES = 12  # of the sample corpus: about 500 prompt tokens
GENERATED = 64


def _flag_set(name: str) -> FlagSet:
    known = {f.name: f for f in [NATIVE, *flag_sets(Cpu.here())]}
    if name not in known:
        raise SystemExit(f"unknown flag set {name!r}: one of installed, {', '.join(known)}")
    return known[name]


def _engine(settings: Settings, name: str, model: Path) -> tuple[Path, FlagSet]:
    """The binary measured as `name` and its flag set: the installed one, or a bench build
    of that flag set, compiled and smoke-run here once."""
    if name == "installed":
        stamp = read_stamp(settings)
        if stamp is None:
            raise SystemExit("no installed engine: run `hoprag llm build` first")
        return engine_path(settings), _flag_set(str(stamp["flag_set"]))
    flag_set = _flag_set(name)
    folder = settings.home / "bench" / "engines" / name
    binary, record = folder / "llama-server", folder / "build.json"
    wanted = {"cmake_flags": [*ENGINE_CMAKE_FLAGS, *flag_set.cmake_flags]}
    if binary.is_file() and record.is_file() and json.loads(record.read_text()) == wanted:
        return binary, flag_set
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "build.log"
    log.write_text("")
    with sources(settings, log) as source:
        built = compile_server(source, source.parent / "build", flag_set, log)
        smoke_run(built, model, log, settings.llm_threads)
        shutil.copy2(built, binary)
    record.write_text(json.dumps(wanted))
    return binary, flag_set


def _home_for(settings: Settings, name: str, binary: Path, flag_set: FlagSet) -> Path:
    """A HOPRAG_HOME whose engine is `binary` and whose other models are the real ones."""
    home = settings.home / "bench" / "homes" / name
    models = home / "models"
    if models.exists():
        shutil.rmtree(models)
    models.mkdir(parents=True)
    for entry in settings.models_dir.iterdir():
        if entry.name != "engine":
            (models / entry.name).symlink_to(entry)
    install(binary, Settings(home=home), flag_set, Cpu.here())
    return home


def _tokens_per_second(settings: Settings, prompt: str) -> dict[str, float]:
    """One server start, one uncached prompt read and GENERATED tokens written."""
    server = EmbeddedServer(settings).start()
    try:
        body = {
            "prompt": prompt,
            "n_predict": GENERATED,
            "temperature": 0,
            "cache_prompt": False,
            "ignore_eos": True,
        }
        timings = post_json(f"{server.root_url}/completion", body, 600)["timings"]
    finally:
        server.stop()
    return {
        "prompt_tokens": timings["prompt_n"],
        "prompt_tps": timings["prompt_per_second"],
        "gen_tps": timings["predicted_per_second"],
    }


def _ask(home: Path) -> dict[str, Any]:
    """`hoprag ask` of the sample question, as a user runs it: its wall seconds, the
    seconds spent in chat calls, the calls and the answer."""
    os.environ["HOPRAG_HOME"] = str(home)
    hoprag = str(Path(sys.executable).with_name("hoprag"))
    seconds, _, out = run_measured([hoprag, "ask", QUESTION, "--index", "sample", "--json"])
    reply = json.loads(out)
    return {
        "ask_s": round(seconds, 2),
        "llm_s": round(reply["cost"]["llm_seconds"], 2),
        "llm_calls": reply["cost"]["llm_calls"],
        "answer": str(reply["answer"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flag-sets", nargs="+", default=["native", "installed"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    settings = Settings()
    model = require_model(settings)
    os.environ["HOPRAG_QA_CACHE"] = "false"  # every ask reads the chain, none is cached
    passages = json.loads(SAMPLE.read_text())[:PROMPT_PASSAGES]
    prompt = "\n\n".join(f"{p['title']}: {p['text']}" for p in passages)
    engines: dict[str, dict[str, Any]] = {}
    for name in args.flag_sets:
        binary, flag_set = _engine(settings, name, model)
        home = _home_for(settings, name, binary, flag_set)
        os.environ["HOPRAG_HOME"] = str(home)
        run_measured([str(Path(sys.executable).with_name("hoprag")), "index", str(SAMPLE),
                      "--name", "sample", "--quiet"])  # fmt: skip
        engines[name] = {"flag_set": flag_set.name, "home": home, "runs": []}
    for repeat in range(args.repeats):
        for name, engine in engines.items():
            speed = _tokens_per_second(Settings(home=engine["home"]), prompt)
            engine["runs"].append({**speed, **_ask(engine["home"])})
            print(f"repeat {repeat + 1} {name}: {engine['runs'][-1]}", flush=True)
            time.sleep(1)
    rows = []
    for name, engine in engines.items():
        runs = engine["runs"]
        rows.append(
            {
                "engine": name,
                "flag_set": engine["flag_set"],
                "prompt_tokens": runs[0]["prompt_tokens"],
                "prompt_tps": round(statistics.median(r["prompt_tps"] for r in runs), 1),
                "gen_tps": round(statistics.median(r["gen_tps"] for r in runs), 1),
                "ask_s": round(statistics.median(r["ask_s"] for r in runs), 1),
                "llm_s": round(statistics.median(r["llm_s"] for r in runs), 1),
                "answers": sorted({r["answer"] for r in runs}),
                "runs": runs,
            }
        )
    command = "python -m bench.engine_speed --flag-sets " + " ".join(args.flag_sets)
    save("engine_speed", {"command": f"{command} --repeats {args.repeats}", "rows": rows})


if __name__ == "__main__":
    main()
