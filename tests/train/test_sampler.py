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


def test_sampled_tokens_follow_the_model_distribution(tiny_model_dir: Path) -> None:
    """Inverse-CDF draws reproduce a known distribution per row (a broken draw skews or shifts it)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    generator = LocalBatchedGenerator(model=None, tokenizer=tokenizer, seed=1)
    probs = torch.zeros(2, 50)
    probs[0, [0, 7, 49]] = torch.tensor([0.5, 0.3, 0.2])
    probs[1, [3, 4]] = torch.tensor([0.9, 0.1])
    counts = torch.zeros(2, 50)
    logp = probs.log()
    for _ in range(4000):
        counts[torch.arange(2), generator._draw(logp)] += 1
    assert counts[0, [0, 7, 49]].sum() == counts[1, [3, 4]].sum() == 4000, "never a token of probability 0"
    assert (counts[0, [0, 7, 49]] / 4000).tolist() == pytest.approx([0.5, 0.3, 0.2], abs=0.03)
    assert (counts[1, [3, 4]] / 4000).tolist() == pytest.approx([0.9, 0.1], abs=0.03)


@pytest.mark.timeout(120)
def test_next_turn_reuses_the_sessions_cache_and_samples_as_a_full_forward_would(tiny_model_dir: Path) -> None:
    """Turn 2 of three sessions (different lengths, one batch) feeds only the new tokens, and its logprobs
    still equal a plain forward over the whole conversation; without the cache the same tokens come out."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    prompts = [tokenizer(t)["input_ids"] for t in ("Vesk is the capital", "Who founded Acme Works? web_search", "Alice")]
    observation = tokenizer(" browse_webpage url_list https://wiki.example/acme")["input_ids"]

    def two_turns(generator: LocalBatchedGenerator) -> list[tuple[list[int], object]]:
        async def session(i: int, prompt: list[int]):  # noqa: ANN202
            params = SamplingParams(max_tokens=6 + 3 * i, temperature=0.8, session=i)
            first = await generator.generate(prompt, params)
            second_prompt = prompt + first.token_ids + observation
            return second_prompt, await generator.generate(second_prompt, params)

        async def run_all():  # noqa: ANN202
            return await asyncio.gather(*(session(i, p) for i, p in enumerate(prompts)))

        return asyncio.run(run_all())

    cached = LocalBatchedGenerator(model, tokenizer, seed=5)
    results = two_turns(cached)
    turn_one_lengths = [len(prompt) - len(observation) for prompt, _ in results]
    assert cached.reused_tokens == sum(n - 1 for n in turn_one_lengths), "all but each turn's last sampled token"
    for prompt, result in results:
        full = torch.tensor([prompt + result.token_ids])
        with torch.no_grad():
            logits = model(full).logits[0, len(prompt) - 1 : -1] / 0.8
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(result.token_ids).unsqueeze(-1)).squeeze(-1)
        assert result.logprobs == pytest.approx(expected.tolist(), abs=2e-4)

    uncached = LocalBatchedGenerator(model, tokenizer, seed=5, kv_cache_bytes=0)
    plain = two_turns(uncached)
    assert uncached.reused_tokens == 0
    assert [r.token_ids for _, r in plain] == [r.token_ids for _, r in results]
