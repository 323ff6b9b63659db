"""The in-process batched sampler: its logprobs are the model's (so GRPO's first ratio is 1), batched or not."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from deepresearcher.generate.base import SamplingParams
from deepresearcher.train.sampler import LocalBatchedGenerator

torch.set_num_threads(1)


@pytest.mark.timeout(60)
def test_batched_left_padded_sampling_logprobs_match_a_full_forward(tiny_model_dir: Path) -> None:
    """Three concurrent prompts of different lengths, one batch: each row's sampled logprobs equal
    log_softmax(logits / T) of a plain unpadded forward over prompt + sampled ids."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    generator = LocalBatchedGenerator(model, tokenizer, seed=3)
    prompts = [tokenizer("Vesk is the capital")["input_ids"], tokenizer("Who founded Acme Works? web_search")["input_ids"],
               tokenizer("Alice")["input_ids"]]
    params = SamplingParams(max_tokens=12, temperature=0.7)

    async def run_all():  # noqa: ANN202
        return await asyncio.gather(*(generator.generate(p, params) for p in prompts))

    results = asyncio.run(run_all())
    assert generator.prefill_tokens == sum(len(p) for p in prompts), "all three were sampled as one batch"
    for prompt, result in zip(prompts, results):
        assert len(result.token_ids) == len(result.logprobs) > 0
        full = torch.tensor([prompt + result.token_ids])
        with torch.no_grad():
            logits = model(full).logits[0, len(prompt) - 1 : -1] / 0.7
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(result.token_ids).unsqueeze(-1)).squeeze(-1)
        assert result.logprobs == pytest.approx(expected.tolist(), abs=2e-4)
        if result.finish_reason == "length":
            assert len(result.token_ids) == 12


def test_stop_string_ends_a_row_and_is_kept(tiny_model_dir: Path) -> None:
    """Greedy sampling that reaches a stop string stops right after it, keeping it, with finish 'stop'."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    generator = LocalBatchedGenerator(model, tokenizer)
    probe = asyncio.run(generator.generate(tokenizer("Vesk")["input_ids"], SamplingParams(max_tokens=6, temperature=0)))
    stop = tokenizer.decode(probe.token_ids[:2])  # whatever greedy writes first becomes the stop string
    result = asyncio.run(generator.generate(tokenizer("Vesk")["input_ids"],
                                            SamplingParams(max_tokens=6, temperature=0, stop=[stop])))
    assert result.finish_reason == "stop" and result.stop_reason == stop
    assert tokenizer.decode(result.token_ids).endswith(stop)
    assert result.token_ids == probe.token_ids[: len(result.token_ids)]
