"""SFT step speed on the default torch thread count against ``train.threads.ThreadChooser``, with and without a busy
process beside it (what a shared machine's slow hour is), alternated in one run, the calibration beside each.

Workload: the quickstart's tiny Qwen2 shape (random weights, fixed seed), 16 random-token episodes of 150-900
tokens a step, the SFT loss and AdamW, as ``bench sft``. The busy process is a Python loop on one core.

    deepresearcher bench threads --json
    deepresearcher bench threads --steps 12 --rounds 2
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time

_BATCH = 16


def run_mode(adaptive: bool, steps: int, seed: int) -> dict:
    """``steps`` SFT steps (after one untimed) on the default count, or with the chooser; tokens/s and threads kept."""
    import torch
    from transformers import Qwen2ForCausalLM

    from deepresearcher.config import load_config
    from deepresearcher.quickstart.tiny_model import tiny_qwen2_config
    from deepresearcher.train.threads import ThreadChooser
    from deepresearcher.warmstart.sft import next_token_loss

    default = torch.get_num_threads()
    shape = load_config("quickstart").train.tiny_model
    config = tiny_qwen2_config(shape, shape.vocab_size, pad_token_id=0, eos_token_id=1)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = random.Random(seed)
    chooser = ThreadChooser(window=3) if adaptive else None

    def step() -> int:
        lengths = [rng.randint(150, 900) for _ in range(_BATCH)]
        width = max(lengths)
        ids = torch.randint(2, shape.vocab_size, (_BATCH, width))
        mask = torch.zeros_like(ids)
        weights = torch.zeros(_BATCH, width)
        for row, n in enumerate(lengths):
            mask[row, :n] = 1
            weights[row, n // 4 : n : 2] = 1.0
        loss = next_token_loss(model, ids, mask, weights)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return sum(lengths)

    step()
    tokens, start = 0, time.perf_counter()
    for _ in range(steps):
        if chooser is not None:
            chooser.before_step()
        n = step()
        tokens += n
        if chooser is not None:
            chooser.after_step(n)
    seconds = time.perf_counter() - start
    kept = chooser.kept if chooser else default
    torch.set_num_threads(default)
    return {"tokens_per_s": round(tokens / seconds, 1), "seconds": round(seconds, 2), "threads_kept": kept}


def main(argv: list[str]) -> dict:
    from deepresearcher.quickstart.calibration import measure_machine

    parser = argparse.ArgumentParser(prog="deepresearcher bench threads")
    parser.add_argument("--steps", type=int, default=12, help="Timed SFT steps per measurement.")
    parser.add_argument("--rounds", type=int, default=2, help="default / adaptive pairs, alternated, per condition.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    results = []
    for busy in (True, False):
        competitor = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
        try:
            time.sleep(1.0)
            for _ in range(args.rounds):
                for adaptive in (False, True):
                    calibration = measure_machine().sft_tokens_per_second
                    results.append({"busy_process_beside": busy, "threads": "adaptive" if adaptive else "default",
                                    "calibration": calibration, **run_mode(adaptive, args.steps, args.seed)})
        finally:
            if competitor is not None:
                competitor.kill()
                competitor.wait()
    return {"runs": results}
