"""The local engine samples as training needs: the model's logprobs (GRPO's first ratio is 1), top-p,
sessions that reuse their KV cache, and draws that do not depend on who shared the batch."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from deepresearcher.generate.base import SamplingParams
from deepresearcher.inference.engine import LocalEngine

torch.set_num_threads(1)


@pytest.mark.timeout(60)
def test_batched_left_padded_sampling_logprobs_match_a_full_forward(tiny_model_dir: Path) -> None:
    """Three concurrent prompts of different lengths, one batch: each row's sampled logprobs equal
    log_softmax(logits / T) of a plain unpadded forward over prompt + sampled ids."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    generator = LocalEngine(model, tokenizer, seed=3, batch_wait_s=0.05)
    prompts = [tokenizer("Vesk is the capital")["input_ids"], tokenizer("Who founded Acme Works? web_search")["input_ids"],
               tokenizer("Alice")["input_ids"]]
    params = SamplingParams(max_tokens=12, temperature=0.7)

    async def run_all():  # noqa: ANN202
        return await asyncio.gather(*(generator.generate(p, params) for p in prompts))

    results = asyncio.run(run_all())
    assert generator.prefill_tokens == sum(len(p) for p in prompts), "all three were sampled as one batch"
    for prompt, result in zip(prompts, results):
        assert len(result.token_ids) == len(result.logprobs) > 0
        full = torch.tensor([prompt + result.token_ids], device=model.device)
        with torch.no_grad():
            logits = model(full).logits[0, len(prompt) - 1 : -1] / 0.7
        sampled = torch.tensor(result.token_ids, device=logits.device)
        expected = torch.log_softmax(logits, -1).gather(-1, sampled.unsqueeze(-1)).squeeze(-1)
        assert result.logprobs == pytest.approx(expected.tolist(), abs=2e-4)
        if result.finish_reason == "length":
            assert len(result.token_ids) == 12


def test_stop_string_ends_a_row_and_is_kept(tiny_model_dir: Path) -> None:
    """Greedy sampling that reaches a stop string stops right after it, keeping it, with finish 'stop'."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    generator = LocalEngine(model, tokenizer)
    probe = asyncio.run(generator.generate(tokenizer("Vesk")["input_ids"], SamplingParams(max_tokens=6, temperature=0)))
    stop = tokenizer.decode(probe.token_ids[:2])  # whatever greedy writes first becomes the stop string
    result = asyncio.run(generator.generate(tokenizer("Vesk")["input_ids"],
                                            SamplingParams(max_tokens=6, temperature=0, stop=[stop])))
    assert result.finish_reason == "stop" and result.stop_reason == stop
    assert stop in tokenizer.decode(result.token_ids)
    assert result.token_ids == probe.token_ids[: len(result.token_ids)]


def _rows(*params: SamplingParams) -> list[SimpleNamespace]:
    return [SimpleNamespace(params=p, rng=random.Random(i)) for i, p in enumerate(params)]


def test_sampled_tokens_follow_the_model_distribution_and_top_p(tiny_model_dir: Path) -> None:
    """Inverse-CDF draws reproduce a known distribution per row; top-p keeps only the nucleus, renormalized
    (a broken draw skews or shifts it; an ignored top_p lets the tail through)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    engine = LocalEngine(SimpleNamespace(config=SimpleNamespace(), parameters=lambda: iter([torch.zeros(1)])), tokenizer)
    probs = torch.zeros(3, 50)
    probs[0, [0, 7, 49]] = torch.tensor([0.5, 0.3, 0.2])
    probs[1, [3, 4]] = torch.tensor([0.9, 0.1])
    probs[2, [5, 6, 8]] = torch.tensor([0.6, 0.3, 0.1])
    rows = _rows(SamplingParams(temperature=1.0), SamplingParams(temperature=1.0),
                 SamplingParams(temperature=1.0, top_p=0.8))
    counts = torch.zeros(3, 50)
    logits = probs.clamp_min(1e-30).log()
    for _ in range(4000):
        tokens, logprobs = engine._sample(logits, rows)
        counts[torch.arange(3), tokens] += 1
    assert counts[0, [0, 7, 49]].sum() == counts[1, [3, 4]].sum() == 4000, "never a token of probability 0"
    assert (counts[0, [0, 7, 49]] / 4000).tolist() == pytest.approx([0.5, 0.3, 0.2], abs=0.03)
    assert (counts[1, [3, 4]] / 4000).tolist() == pytest.approx([0.9, 0.1], abs=0.03)
    assert counts[2, 8] == 0, "top_p=0.8 keeps 0.6 + 0.3: the 0.1 tail is never drawn"
    assert (counts[2, [5, 6]] / 4000).tolist() == pytest.approx([2 / 3, 1 / 3], abs=0.03)


def test_what_a_request_samples_does_not_depend_on_its_batch(tiny_model_dir: Path) -> None:
    """The same requests sampled all together, one at a time, and in reverse order draw the same tokens:
    each row has its own stream (keyed by seed, session and turn), so the clock that decides admission
    cannot change a training step's samples."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    prompts = [tokenizer(t)["input_ids"] for t in ("Vesk is the capital", "Who founded Acme Works?", "Alice")]
    params = [SamplingParams(max_tokens=10, temperature=1.0, session=100 + i) for i in range(3)]

    def sample(order: list[int], together: bool) -> dict[int, list[int]]:
        engine = LocalEngine(model, tokenizer, seed=11)

        async def run_all():  # noqa: ANN202
            if together:
                return await asyncio.gather(*(engine.generate(prompts[i], params[i]) for i in order))
            return [await engine.generate(prompts[i], params[i]) for i in order]

        return {i: r.token_ids for i, r in zip(order, asyncio.run(run_all()))}

    together = sample([0, 1, 2], together=True)
    assert sample([0, 1, 2], together=False) == together
    assert sample([2, 1, 0], together=True) == together
    assert len({tuple(t) for t in together.values()}) == 3


@pytest.mark.timeout(120)
def test_next_turn_reuses_the_sessions_cache_and_samples_as_a_full_forward_would(tiny_model_dir: Path) -> None:
    """Turn 2 of three sessions (different lengths, one batch) feeds only the new tokens, and its logprobs
    still equal a plain forward over the whole conversation; without the cache the same tokens come out."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    prompts = [tokenizer(t)["input_ids"] for t in ("Vesk is the capital", "Who founded Acme Works? web_search", "Alice")]
    observation = tokenizer(" browse_webpage url_list https://wiki.example/acme")["input_ids"]

    def two_turns(generator: LocalEngine) -> list[tuple[list[int], object]]:
        async def session(i: int, prompt: list[int]):  # noqa: ANN202
            params = SamplingParams(max_tokens=6 + 3 * i, temperature=0.8, session=i)
            first = await generator.generate(prompt, params)
            second_prompt = prompt + first.token_ids + observation
            return second_prompt, await generator.generate(second_prompt, params)

        async def run_all():  # noqa: ANN202
            return await asyncio.gather(*(session(i, p) for i, p in enumerate(prompts)))

        return asyncio.run(run_all())

    cached = LocalEngine(model, tokenizer, seed=5)
    results = two_turns(cached)
    turn_one_lengths = [len(prompt) - len(observation) for prompt, _ in results]
    assert cached.reused_tokens == sum(n - 1 for n in turn_one_lengths), "all but each turn's last sampled token"
    for prompt, result in results:
        full = torch.tensor([prompt + result.token_ids], device=model.device)
        with torch.no_grad():
            logits = model(full).logits[0, len(prompt) - 1 : -1] / 0.8
        sampled = torch.tensor(result.token_ids, device=logits.device)
        expected = torch.log_softmax(logits, -1).gather(-1, sampled.unsqueeze(-1)).squeeze(-1)
        assert result.logprobs == pytest.approx(expected.tolist(), abs=2e-4)

    uncached = LocalEngine(model, tokenizer, seed=5, kv_cache_bytes=0)
    plain = two_turns(uncached)
    assert uncached.reused_tokens == 0
    assert [r.token_ids for _, r in plain] == [r.token_ids for _, r in results]


@pytest.mark.timeout(120)
def test_a_rewritten_turn_reuses_the_shared_start_and_samples_as_a_full_forward_would(tiny_model_dir: Path) -> None:
    """A next turn whose context rewrites the last sampled turn (as a re-rendering protocol does) reuses the keys
    and values of the ids both share and encodes the rest: its logprobs equal a plain forward's."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    prompt = tokenizer("Who founded Acme Works? web_search")["input_ids"]
    rewrite = tokenizer(" query url_list Vesk is the capital")["input_ids"]
    generator = LocalEngine(model, tokenizer, seed=2)
    params = SamplingParams(max_tokens=8, temperature=0.9, session=7)

    async def two_turns():  # noqa: ANN202
        first = await generator.generate(prompt, params)
        kept = first.token_ids[:3]  # the start of the turn survives; the rest is written anew
        second_prompt = prompt + kept + rewrite
        return first, second_prompt, await generator.generate(second_prompt, params)

    first, second_prompt, second = asyncio.run(two_turns())
    assert first.token_ids[3:4] != rewrite[:1] or len(first.token_ids) <= 3
    assert generator.reused_tokens == len(prompt) + min(3, len(first.token_ids) - 1)
    assert generator.prefill_tokens == len(prompt) + len(second_prompt) - generator.reused_tokens
    full = torch.tensor([second_prompt + second.token_ids], device=model.device)
    with torch.no_grad():
        logits = model(full).logits[0, len(second_prompt) - 1 : -1] / 0.9
    sampled = torch.tensor(second.token_ids, device=logits.device)
    expected = torch.log_softmax(logits, -1).gather(-1, sampled.unsqueeze(-1)).squeeze(-1)
    assert second.logprobs == pytest.approx(expected.tolist(), abs=2e-4)


class _Only:
    """A token constraint allowing a fixed set of ids (``SamplingParams.constraint``)."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids

    def allowed(self, sampled: list[int]) -> list[int]:
        return self.ids


def test_a_constrained_row_samples_the_best_allowed_token_and_leaves_its_batch_alone(tiny_model_dir: Path) -> None:
    """Guided decoding's hook: a row with a constraint takes, greedily, the argmax of a full forward over its allowed
    ids at every step; an unconstrained row decoding beside it samples exactly what it samples alone."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    engine = LocalEngine(model, tokenizer, seed=1, batch_wait_s=0.05)
    prompt = tokenizer("Vesk is the capital")["input_ids"]
    free = SamplingParams(max_tokens=8, temperature=0.9, seed=4)
    allowed = [7, 23, 101, 250]
    guided = SamplingParams(max_tokens=8, temperature=0, constraint=_Only(allowed))
    alone = asyncio.run(engine.generate(prompt, free))

    async def together():  # noqa: ANN202
        return await asyncio.gather(engine.generate(prompt, free), engine.generate(prompt, guided))

    beside, constrained = asyncio.run(together())
    assert engine.batches[-1] == 2, "both rows decoded in one batch"
    assert beside.token_ids == alone.token_ids and beside.logprobs == pytest.approx(alone.logprobs, abs=1e-5)
    assert len(constrained.token_ids) == 8 and set(constrained.token_ids) <= set(allowed)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + constrained.token_ids])).logits[0, len(prompt) - 1 : -1]
    best = [allowed[int(row[allowed].argmax())] for row in logits]
    assert constrained.token_ids == best
    assert "constraint" not in guided.model_dump(), "a constraint is never sent to a server"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("static_cache", [False, True])
def test_rows_that_finish_first_leave_the_others_sampling_as_a_full_forward_would(tiny_model_dir: Path,
                                                                                  static_cache: bool) -> None:
    """Six rows of one batch end at different steps (``max_tokens`` 2 to 12, the short ones first and in the
    middle): the rows after them move into their slots (``engine.fill_holes``), and every row's logprobs still
    equal a plain forward over its own prompt and samples, its tokens those it draws alone."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    texts = ("Vesk is the capital", "Who founded Acme Works?", "Alice", "Bob went to", "The river", "web_search")
    prompts = [tokenizer(t)["input_ids"] for t in texts]
    params = [SamplingParams(max_tokens=n, temperature=1.0, seed=i) for i, n in enumerate((2, 12, 3, 10, 4, 12))]

    def sample(together: bool) -> list[object]:
        engine = LocalEngine(model, tokenizer, seed=7, batch_wait_s=0.05, static_cache=static_cache)

        async def run_all():  # noqa: ANN202
            if together:
                return await asyncio.gather(*(engine.generate(p, q) for p, q in zip(prompts, params)))
            return [await engine.generate(p, q) for p, q in zip(prompts, params)]

        results = asyncio.run(run_all())
        if together:
            assert engine.batches == [len(prompts)], "one batch, which rows leave one by one"
        return results

    together = sample(True)
    assert [r.token_ids for r in sample(False)] == [r.token_ids for r in together]
    for prompt, result in zip(prompts, together):
        full = torch.tensor([prompt + result.token_ids], device=model.device)
        with torch.no_grad():
            logits = model(full).logits[0, len(prompt) - 1 : -1]
        sampled = torch.tensor(result.token_ids, device=logits.device)
        expected = torch.log_softmax(logits, -1).gather(-1, sampled.unsqueeze(-1)).squeeze(-1)
        assert result.logprobs == pytest.approx(expected.tolist(), abs=2e-4)
