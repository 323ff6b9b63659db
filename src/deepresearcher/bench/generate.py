"""Local generator benchmark: tokens/s of ``LocalEngine`` with concurrent requests vs one at a time.

The same prompts and sampling (greedy, ``--tokens`` each) run twice: sequentially, then all at once
(continuous batching shares each forward pass), then with staggered arrivals (``--stagger-ms`` apart,
as rollouts coming back from tools do), which exercises requests joining a running batch.

``--cuda-graphs`` / ``--static-cache`` (on, off; default: the engine's choice, graphs on a GPU) pick the
decode path (``inference.static_decode``); ``--hf-generate`` also times transformers' eager
``model.generate`` on the same model and prompts, one at a time and as one batch, for comparison.

    deepresearcher bench generate --json
    deepresearcher bench generate --embedded --requests 8 --tokens 32   # SmolLM2-135M on this machine
    deepresearcher bench generate --requests 32 --hf-generate --cuda-graphs off   # on a GPU: the eager baseline
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from deepresearcher.config import Config, TinyModelConfig
from deepresearcher.generate.base import SamplingParams
from deepresearcher.inference.engine import LocalEngine


def _generator(embedded: bool, workdir: Path, batch: int, **engine: Any) -> LocalEngine:
    if embedded:
        from deepresearcher.inference.loader import load_model

        return LocalEngine(*load_model("smollm2", Config().resolved_cache_dir()), max_batch_size=batch, **engine)
    from deepresearcher.quickstart.tiny_model import build_tiny_checkpoint

    texts = ["the capital of freedonia is fredville", "who founded the velmora works company"] * 50
    spec = TinyModelConfig(vocab_size=400, hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=2,
                           intermediate_size=384, max_positions=2048)
    return LocalEngine.from_pretrained(str(build_tiny_checkpoint(texts, workdir, spec)), max_batch_size=batch, **engine)


async def _run(generator: LocalEngine, prompts: list[list[int]], params: SamplingParams,
               mode: str, stagger: float) -> tuple[float, int]:
    start = time.perf_counter()
    if mode == "sequential":
        results = [await generator.generate(p, params) for p in prompts]
    else:
        async def delayed(i: int, prompt: list[int]):
            await asyncio.sleep(i * stagger if mode == "staggered" else 0)
            return await generator.generate(prompt, params)

        results = await asyncio.gather(*(delayed(i, p) for i, p in enumerate(prompts)))
    return time.perf_counter() - start, sum(len(r.token_ids) for r in results)


def _hf_generate(generator: LocalEngine, prompts: list[list[int]], tokens: int) -> dict[str, float]:
    """Tokens/s of transformers' ``model.generate`` (greedy, eager, dynamic cache) on ``prompts``: one at a time,
    then as one left-padded batch; a row's tokens end at its first end-of-sequence token."""
    import torch

    model, tokenizer = generator.model, generator.tokenizer
    pad, eos = generator._pad_id, tokenizer.eos_token_id

    def run(batch: list[list[int]], new: int) -> int:
        width = max(len(p) for p in batch)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch], device=model.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch], device=model.device)
        with torch.inference_mode():
            rows = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, do_sample=False,
                                  pad_token_id=pad, eos_token_id=eos)[:, width:].tolist()
        return sum(row.index(eos) + 1 if eos in row else len(row) for row in rows)

    def timed(batches: list[list[list[int]]]) -> float:
        run(batches[0], 2)  # warm up
        start, sampled = time.perf_counter(), sum(run(batch, tokens) for batch in batches)
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        return round(sampled / (time.perf_counter() - start), 1)

    return {"sequential": timed([[p] for p in prompts]), "concurrent": timed([prompts])}


def _switch(value: str) -> bool | None:
    return {"auto": None, "on": True, "off": False}[value]


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="deepresearcher bench generate")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--stagger-ms", type=float, default=20.0)
    parser.add_argument("--embedded", action="store_true", help="SmolLM2-135M instead of a tiny random model.")
    parser.add_argument("--cuda-graphs", choices=("auto", "on", "off"), default="auto")
    parser.add_argument("--static-cache", choices=("auto", "on", "off"), default="auto")
    parser.add_argument("--hf-generate", action="store_true", help="Also time transformers' model.generate.")
    args = parser.parse_args(argv)

    import torch

    with tempfile.TemporaryDirectory() as tmp:
        generator = _generator(args.embedded, Path(tmp) / "model", args.requests,
                               cuda_graphs=_switch(args.cuda_graphs), static_cache=_switch(args.static_cache))
        vocab = len(generator.tokenizer)
        prompts = [[(7 * i + 13 * j) % (vocab - 10) + 5 for j in range(args.prompt_tokens)] for i in range(args.requests)]
        params = SamplingParams(max_tokens=args.tokens, temperature=0.0)

        async def measure() -> dict[str, tuple[float, int]]:
            await generator.generate(prompts[0], SamplingParams(max_tokens=2))  # warm up
            out = {m: await _run(generator, prompts, params, m, args.stagger_ms / 1000)
                   for m in ("sequential", "concurrent", "staggered")}
            await generator.aclose()
            return out

        runs = asyncio.run(measure())
        hf = _hf_generate(generator, prompts, args.tokens) if args.hf_generate else None
    rate = {m: round(n / wall, 1) for m, (wall, n) in runs.items()}
    extra = {} if hf is None else {"hf_generate_tokens_per_s": hf,
                                   "speedup_over_hf_generate": {m: round(rate[m] / hf[m], 2) for m in hf}}
    return {
        "benchmark": "generate",
        "params": vars(args),
        "device": str(generator.device),
        "threads": torch.get_num_threads(),
        "tokens_per_s": rate,
        "wall_s": {m: round(wall, 3) for m, (wall, _) in runs.items()},
        "speedup_concurrent": round(rate["concurrent"] / rate["sequential"], 2),
        "speedup_staggered": round(rate["staggered"] / rate["sequential"], 2),
        "rows_joined_running_batch": generator.joined,
        "cuda_graphs": generator.cuda_graphs,
        "static_steps": generator.static_steps,
        "decode_steps": generator.decode_steps,
        **extra,
    }


if __name__ == "__main__":
    print(json.dumps(main(__import__("sys").argv[1:]), indent=2))
