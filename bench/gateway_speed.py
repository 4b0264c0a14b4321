"""Prompt and generation tokens per second through the LLM gateway.

    .venv/bin/python -m bench.gateway_speed [--model qwen2.5-coder-1.5b] [--repeats 3]

Each prompt starts with a fresh nonce so llama.cpp's prompt cache cannot help. Prompt
speed is input tokens over the time of a 1-token reply; generation speed is the extra
output tokens over the extra time of a long reply to the same-length prompt. Measured
with and without `--logits_all` (needed for yes/no log-probabilities).
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from langchain_core.messages import HumanMessage

from app.llm import LLMGateway
from app.settings import Settings
from bench.common import save

FILLER = (
    "The river passes the old mill, the market square and the stone bridge before "
    "it reaches the harbour. "
) * 24


def measure(gateway: LLMGateway, max_tokens: int, ask: str) -> tuple[int, int, float]:
    before = gateway.meter.snapshot()
    prompt = f"[{uuid.uuid4().hex}] {FILLER}\n{ask}"
    start = time.perf_counter()
    gateway.invoke([HumanMessage(prompt)], max_tokens=max_tokens)
    seconds = time.perf_counter() - start
    after = gateway.meter.snapshot()
    return (
        int(after["input_tokens"] - before["input_tokens"]),
        int(after["output_tokens"] - before["output_tokens"]),
        seconds,
    )


def run(settings: Settings, repeats: int) -> dict[str, float]:
    gateway = LLMGateway(settings)
    try:
        measure(gateway, 1, "Say ok.")  # warm-up
        prompt_tps, gen_tps = [], []
        for _ in range(repeats):
            n_in, _, t_short = measure(gateway, 1, "Say ok.")
            _, n_out, t_long = measure(gateway, 128, "Count from 1 to 100, comma separated.")
            prompt_tps.append(n_in / t_short)
            gen_tps.append((n_out - 1) / max(t_long - t_short, 1e-6))
    finally:
        gateway.close()
    return {
        "prompt_tokens": n_in,
        "prompt_tok_per_s": round(statistics.median(prompt_tps), 1),
        "gen_tok_per_s": round(statistics.median(gen_tps), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=Settings().model)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for logits_all in (True, False):
        settings = Settings(model=args.model, llm_logits_all=logits_all)
        row = {"model": args.model, "logits_all": logits_all, **run(settings, args.repeats)}
        print(row, flush=True)
        rows.append(row)
    save(
        f"gateway_speed_{args.model}",
        {
            "command": f"python -m bench.gateway_speed --model {args.model} --repeats "
            f"{args.repeats}",
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
