"""Train the sub-question writer's LoRA adapter on training decompositions (issue 34).

The 1.5B writer, shown three similar worked examples, still drifts on MuSiQue's nested
questions. This fine-tunes a LoRA adapter on the gold chains of the example bank
(`app/data/sub_question_examples.json`, training splits only): for every step of a
chain, the prompt `write_sub_question_tuned` with the steps before it answered, and the
step itself as the reply. The chat model's GGUF weights are dequantised into torch for
training (transformers reads GGUF), and the adapter is written back as a GGUF LoRA that
`llama-server --lora` loads (llama.cpp's `convert_lora_to_gguf.py`, from the engine's
source archive).

    python -m app.writer_adapter    # about 70 minutes on 2 cores; installs the adapter
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.llm.engine import llama_cpp_source
from app.llm.models import require_model
from app.settings import WRITER_ADAPTER_FILE, WRITER_ADAPTER_MODEL, Settings
from app.traindata import EXAMPLES_FILE
from prompts import load_prompt
from tools.examples import render_steps

SEED = 13
TRAIN_PROMPT = "write_sub_question_tuned"
WARMUP_STEPS = 20  # then the learning rate falls linearly to 0 over the one pass
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def chat_roles(messages: list) -> list[dict[str, str]]:
    """LangChain messages as the chat template's role dicts."""
    roles = {"system": "system", "human": "user", "ai": "assistant"}
    return [{"role": roles[m.type], "content": m.content} for m in messages]


def writer_examples(limit: int) -> list[tuple[list[dict[str, str]], str]]:
    """(prompt messages, reply) for each step of the bank's chains: every MuSiQue step,
    then 2Wiki steps up to `limit` (MuSiQue's nested questions are where the writer
    drifts; 2Wiki's chains are many and alike)."""
    chains = json.loads(EXAMPLES_FILE.read_text(encoding="utf-8"))
    prompt = load_prompt(TRAIN_PROMPT)
    musique, others = [], []
    for chain in chains:
        steps = [tuple(step) for step in chain["steps"]]
        for k, (sub_question, _) in enumerate(steps):
            messages = prompt.format_messages(
                question=chain["question"], known=render_steps(steps[:k]), forbidden=""
            )
            example = (chat_roles(messages), sub_question)
            (musique if "musique" in chain["source"] else others).append(example)
    rng = random.Random(SEED)
    rng.shuffle(others)
    picked = (musique + others)[:limit]
    rng.shuffle(picked)
    return picked


def train(model: Path, out: Path, limit: int, rank: int, lr: float) -> None:
    """LoRA on every linear layer, one pass over `limit` steps, loss on the reply only."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(SEED)
    tokenizer = AutoTokenizer.from_pretrained(model.parent, gguf_file=model.name)
    llm = AutoModelForCausalLM.from_pretrained(
        model.parent, gguf_file=model.name, dtype=torch.bfloat16
    )
    out.mkdir(parents=True, exist_ok=True)
    llm.config.architectures = ["Qwen2ForCausalLM"]  # the GGUF converter needs it
    llm.config.save_pretrained(out / "base")  # the converter reads only the config
    config = LoraConfig(
        r=rank, lora_alpha=2 * rank, lora_dropout=0.05, target_modules=list(LORA_TARGETS)
    )
    model = get_peft_model(llm, config)
    examples = writer_examples(limit)
    optimiser = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser,
        lambda step: min(1.0, (step + 1) / WARMUP_STEPS) * max(0.0, 1 - step / len(examples)),
    )
    model.train()
    started, losses = time.time(), []
    for step, (messages, reply) in enumerate(examples):
        prompt_ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        reply_ids = tokenizer(reply + "<|im_end|>", add_special_tokens=False)["input_ids"]
        ids = torch.tensor([prompt_ids + reply_ids])
        labels = torch.tensor([[-100] * len(prompt_ids) + reply_ids])
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
        losses.append(loss.item())
        if step % 20 == 0 or step == len(examples) - 1:
            recent = sum(losses[-20:]) / len(losses[-20:])
            print(
                f"step {step + 1}/{len(examples)} loss {recent:.3f} {time.time() - started:.0f} s",
                flush=True,
            )
    model.save_pretrained(out / "peft")
    (out / "training.json").write_text(
        json.dumps(
            {
                "examples": len(examples),
                "rank": rank,
                "lr": lr,
                "seconds": round(time.time() - started),
                "loss_first_50": sum(losses[:50]) / min(50, len(losses)),
                "loss_last_50": sum(losses[-50:]) / min(50, len(losses)),
            },
            indent=1,
        )
    )


def convert(out: Path, settings: Settings) -> Path:
    """The PEFT adapter in `out` as a GGUF LoRA, by llama.cpp's own converter, from the
    engine's pinned source archive."""
    target = out / "writer-lora.gguf"
    with tempfile.TemporaryDirectory(prefix="hoprag-convert-") as tmp:
        source = llama_cpp_source(settings, Path(tmp))
        subprocess.run(
            [
                sys.executable,
                str(source / "convert_lora_to_gguf.py"),
                "--base",
                str(out / "base"),
                "--outfile",
                str(target),
                "--outtype",
                "q8_0",
                str(out / "peft"),
            ],
            check=True,
            env={**os.environ, "PYTHONPATH": str(source / "gguf-py")},
        )
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/writer"), help="work folder")
    parser.add_argument("--examples", type=int, default=660)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--convert-only", action="store_true", help="reuse a trained adapter")
    args = parser.parse_args()
    settings = Settings()
    model = require_model(settings, WRITER_ADAPTER_MODEL)
    if not args.convert_only:
        train(model, args.out, args.examples, args.rank, args.lr)
    WRITER_ADAPTER_FILE.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(convert(args.out, settings), WRITER_ADAPTER_FILE)
    shutil.copyfile(args.out / "training.json", WRITER_ADAPTER_FILE.with_name("training.json"))
    print(f"installed {WRITER_ADAPTER_FILE}")


if __name__ == "__main__":
    main()
