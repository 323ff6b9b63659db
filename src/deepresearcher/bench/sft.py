"""SFT step speed and memory of the quickstart model in fp32 and in bf16 autocast, alternated in one run.

Workload: the shipped quickstart recipe's tiny Qwen2 shape (``train.tiny_model``; random weights, fixed
seed), batches of 16 random-token
episodes whose lengths are drawn from 150-900 tokens (one to three hops), a third of the positions scored,
the SFT loss (``train.sft.next_token_loss``, which pads to few shapes under bf16 on the CPU) and AdamW,
as ``train_sft`` runs them. Peak resident memory is the process's
(``ru_maxrss``), so each mode runs in its own process.

    deepresearcher bench sft --json
    deepresearcher bench sft --steps 40 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

_BATCH = 16


def run_mode(bf16: bool, steps: int, seed: int) -> dict:
    """Time ``steps`` SFT steps (after one untimed) in this process; returns seconds, tokens/s and peak RSS."""
    import random
    import resource

    import torch
    from transformers import Qwen2ForCausalLM

    from deepresearcher.config import load_config
    from deepresearcher.quickstart.tiny_model import tiny_qwen2_config
    from deepresearcher.warmstart.sft import next_token_loss

    shape = load_config("quickstart").train.tiny_model
    config = tiny_qwen2_config(shape, shape.vocab_size, pad_token_id=0, eos_token_id=1)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = random.Random(seed)
    tokens = 0

    def step() -> int:
        lengths = [rng.randint(150, 900) for _ in range(_BATCH)]
        width = max(lengths)
        ids = torch.randint(2, shape.vocab_size, (_BATCH, width))
        mask = torch.zeros_like(ids)
        weights = torch.zeros(_BATCH, width)
        for row, n in enumerate(lengths):
            mask[row, :n] = 1
            weights[row, n // 4 : n : rng.randint(2, 4)] = 1.0
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = next_token_loss(model, ids, mask, weights)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return sum(lengths)

    step()
    start = time.perf_counter()
    for _ in range(steps):
        tokens += step()
    seconds = time.perf_counter() - start
    return {"seconds": round(seconds, 2), "tokens_per_s": round(tokens / seconds, 1),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "torch_threads": torch.get_num_threads()}


def main(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="deepresearcher bench sft")
    parser.add_argument("--steps", type=int, default=20, help="Timed SFT steps per measurement.")
    parser.add_argument("--rounds", type=int, default=2, help="fp32 / bf16 pairs, alternated.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", choices=["fp32", "bf16"], help=argparse.SUPPRESS)  # one measurement, in a child
    args = parser.parse_args(argv)
    if args.mode:
        return run_mode(args.mode == "bf16", args.steps, args.seed)
    from deepresearcher.train.precision import cpu_has_native_bf16

    runs: dict[str, list[dict]] = {"fp32": [], "bf16": []}
    for _ in range(args.rounds):
        for mode in ("fp32", "bf16"):
            child = [sys.executable, "-m", "deepresearcher.cli.main", "bench", "sft", "--mode", mode,
                     "--steps", str(args.steps), "--seed", str(args.seed)]
            out = subprocess.run(child, check=True, capture_output=True, text=True, env=os.environ).stdout
            runs[mode].append(json.loads(out[out.index("{"):]))
    speed = {mode: sum(r["tokens_per_s"] for r in rs) / len(rs) for mode, rs in runs.items()}
    return {"benchmark": "sft", "steps": args.steps,
            "cpu_has_native_bf16": cpu_has_native_bf16(), "runs": runs,
            "bf16_speedup": round(speed["bf16"] / speed["fp32"], 3)}
