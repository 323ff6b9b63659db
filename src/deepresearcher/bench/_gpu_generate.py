"""The generate part of ``bench gpu``: tokens/s of the local engine beside transformers' ``model.generate`` and
vLLM, on the same prompts, greedy, at each ``--requests`` count of concurrent requests.

* the local engine (``inference.engine.LocalEngine``): the requests submitted at once, continuous batching; on
  CUDA with CUDA graphs on and off when its constructor takes ``cuda_graphs``;
* transformers: the same model object, one left-padded batch of the requests through ``model.generate`` in
  eager PyTorch (no ``torch.compile``; the model's default attention and dynamic KV cache);
* vLLM (when installed, on a GPU): ``vllm.LLM`` on the checkpoint, the same token ids.

Each figure is the tokens sampled (up to and including an end-of-sequence token) over the wall time of the
whole batch, after an untimed warm-up batch of the same size.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import inspect
import random
import time
from collections.abc import Callable
from typing import Any

from deepresearcher.bench._gpu_common import PartContext

_WARMUP_TOKENS = 4


def _prompts(count: int, length: int, vocab: int, seed: int = 0) -> list[list[int]]:
    """Random ordinary token ids (below the special tokens), lengths ``length`` down to ``length - 15``, so the
    transformers batch is really left-padded."""
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(length - i % 16)] for i in range(count)]


Rates = dict[str, dict[str, float]]
"""Request count (as text, a JSON key) -> tokens sampled, seconds and tokens/s."""


def _measure(run_batch: Callable[[list[list[int]], int], int], prompts: list[list[int]], counts: list[int],
             new_tokens: int) -> Rates:
    """Time ``run_batch(prompts[:n], new_tokens)`` (which returns the tokens it sampled) at each count ``n``, after
    an untimed warm-up batch of the same size; CUDA work is waited for before the clock stops."""
    import torch

    out: Rates = {}
    for n in counts:
        run_batch(prompts[:n], _WARMUP_TOKENS)
        start = time.perf_counter()
        sampled = run_batch(prompts[:n], new_tokens)
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        out[str(n)] = {"tokens": sampled, "seconds": round(seconds, 3), "tokens_per_s": round(sampled / seconds, 1)}
    return out


def _engine_rates(model: Any, tokenizer: Any, prompts: list[list[int]], counts: list[int], new_tokens: int,
                  engine_kwargs: dict[str, Any]) -> Rates:
    """A fresh ``LocalEngine`` on ``model``, every batch's requests submitted at once."""
    from deepresearcher.inference.engine import LocalEngine
    from deepresearcher.inference.sampling import SamplingParams

    engine = LocalEngine(model, tokenizer, max_batch_size=max(counts), **engine_kwargs)
    loop = asyncio.new_event_loop()

    async def submit(batch: list[list[int]], params: SamplingParams) -> list[Any]:
        return await asyncio.gather(*(engine.generate(p, params) for p in batch))

    def run_batch(batch: list[list[int]], tokens: int) -> int:
        results = loop.run_until_complete(submit(batch, SamplingParams(max_tokens=tokens, temperature=0.0)))
        return sum(len(r.token_ids) for r in results)

    try:
        return _measure(run_batch, prompts, counts, new_tokens)
    finally:
        loop.run_until_complete(engine.aclose())
        loop.close()


def _hf_rates(model: Any, tokenizer: Any, prompts: list[list[int]], counts: list[int], new_tokens: int) -> Rates:
    """``model.generate`` on each batch as one left-padded greedy batch; a row's tokens end at its first EOS."""
    import torch

    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id

    def run_batch(batch: list[list[int]], tokens: int) -> int:
        width = max(len(p) for p in batch)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch], device=model.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch], device=model.device)
        with torch.no_grad():
            rows = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=tokens, do_sample=False,
                                  pad_token_id=pad, eos_token_id=eos)[:, width:].tolist()
        return sum(row.index(eos) + 1 if eos in row else len(row) for row in rows)

    return _measure(run_batch, prompts, counts, new_tokens)


def _vllm_rates(ctx: PartContext, prompts: list[list[int]], counts: list[int], new_tokens: int) -> Rates:
    """vLLM's offline ``LLM`` on the checkpoint (its engine core runs in a process of its own)."""
    from vllm import LLM
    from vllm import SamplingParams as VLLMSamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(model=str(ctx.model_dir), dtype="bfloat16", gpu_memory_utilization=0.4, seed=0,
              max_model_len=max(len(p) for p in prompts) + new_tokens + 8)

    def run_batch(batch: list[list[int]], tokens: int) -> int:
        results = llm.generate([TokensPrompt(prompt_token_ids=p) for p in batch],
                               VLLMSamplingParams(max_tokens=tokens, temperature=0.0), use_tqdm=False)
        return sum(len(r.outputs[0].token_ids) for r in results)

    return _measure(run_batch, prompts, counts, new_tokens)


def generate(ctx: PartContext) -> dict[str, Any]:
    """Every generator's tokens/s at every request count (module docstring); vLLM's row says why it is missing."""
    import torch

    from deepresearcher.inference import device
    from deepresearcher.inference.engine import LocalEngine
    from deepresearcher.inference.loader import load_checkpoint

    o = ctx.options
    counts = sorted({int(n) for n in str(o["requests"]).split(",")})
    model, tokenizer = load_checkpoint(ctx.model_dir, shared=False)
    prompts = _prompts(max(counts), o["prompt_tokens"], min(tokenizer.pad_token_id, model.config.vocab_size))
    graphs = device.on_gpu() and "cuda_graphs" in inspect.signature(LocalEngine.__init__).parameters
    variants = {"local engine, CUDA graphs": {"cuda_graphs": True},
                "local engine, no CUDA graphs": {"cuda_graphs": False}} if graphs else {"local engine": {}}
    rates: dict[str, Any] = {label: _engine_rates(model, tokenizer, prompts, counts, o["new_tokens"], kwargs)
                             for label, kwargs in variants.items()}
    rates["transformers generate"] = _hf_rates(model, tokenizer, prompts, counts, o["new_tokens"])
    dtype = str(model.dtype).removeprefix("torch.")
    del model
    gc.collect()
    if device.on_gpu():
        torch.cuda.empty_cache()
    if importlib.util.find_spec("vllm") is None:
        rates["vllm"] = {"skipped": "vLLM is not installed"}
    elif not device.on_gpu():
        rates["vllm"] = {"skipped": "vLLM needs a CUDA GPU"}
    else:
        rates["vllm"] = _vllm_rates(ctx, prompts, counts, o["new_tokens"])
    return {"requests": counts, "prompt_tokens": o["prompt_tokens"], "new_tokens": o["new_tokens"],
            "dtype": dtype,
            "cuda_graphs_compared": graphs, "generation": rates}
