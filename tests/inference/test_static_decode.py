"""The static-cache decode step samples what the dynamic one does: same tokens, same logprobs (to float noise).

On the CPU the static step runs eagerly (``static_cache=True``): the same slots, scatter writes, 4D masks,
bucket padding with idle rows, compaction, capacity growth and fallbacks that a CUDA graph replays on a GPU.
Every scenario runs on a dynamic engine and a static one over the same model, and each static engine must
have decoded over the static cache (its ``static_steps``), so a silent fallback cannot pass for equality.
The last test replays CUDA graphs and runs only where torch sees a GPU.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from deepresearcher.config import TinyModelConfig
from deepresearcher.generate.base import SamplingParams
from deepresearcher.inference.engine import LocalEngine
from deepresearcher.inference.sampling import GenerationResult
from deepresearcher.quickstart.tiny_model import build_tiny_checkpoint

TEXTS = ["the capital of freedonia is fredville", "search the web and browse pages", "who wrote the book"] * 20

Scenario = Callable[[LocalEngine], Awaitable[list[GenerationResult]]]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    spec = TinyModelConfig(vocab_size=300, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2,
                           intermediate_size=64, max_positions=512)
    return build_tiny_checkpoint(TEXTS, tmp_path_factory.mktemp("tiny"), spec, seed=3)


@pytest.fixture(scope="module", params=["sdpa", "eager"])
def model_and_tokenizer(checkpoint: Path, request: pytest.FixtureRequest) -> tuple[Any, Any]:
    """The tiny model under both attention implementations the static step feeds a 4D additive mask to."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(checkpoint, attn_implementation=request.param).eval()
    return model, AutoTokenizer.from_pretrained(checkpoint)


def encode(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def engine(model_and_tokenizer: tuple[Any, Any], static: bool, **kwargs: Any) -> LocalEngine:
    return LocalEngine(*model_and_tokenizer, static_cache=static, batch_wait_s=0.05, seed=4, **kwargs)


def run_both(model_and_tokenizer: tuple[Any, Any], scenario: Scenario, **static_kwargs: Any
             ) -> tuple[list[GenerationResult], list[GenerationResult], LocalEngine]:
    """``scenario`` on a dynamic engine and on a static one; the static engine is returned to check its counters."""
    dynamic = engine(model_and_tokenizer, static=False)
    expected = asyncio.run(scenario(dynamic))
    assert dynamic.static_steps == 0
    static = engine(model_and_tokenizer, static=True, **static_kwargs)
    return expected, asyncio.run(scenario(static)), static


async def join_after_first(generator: LocalEngine, requests: list[tuple[list[int], SamplingParams]]
                           ) -> list[GenerationResult]:
    """The first request admitted alone, the others joining its running batch, whatever the CPU's load."""
    with generator.weights_lock:  # the decode thread takes the first request, then waits here to prefill it
        first = asyncio.ensure_future(generator.generate(*requests[0]))
        await asyncio.sleep(0)
        while not generator._pending.empty():
            await asyncio.sleep(0.001)
        others = asyncio.gather(*(generator.generate(*request) for request in requests[1:]))
        while generator._pending.qsize() < len(requests) - 1:
            await asyncio.sleep(0)
    return [await first, *await others]


def assert_same(expected: list[GenerationResult], got: list[GenerationResult]) -> None:
    assert [r.token_ids for r in got] == [r.token_ids for r in expected]
    assert [(r.finish_reason, r.stop_reason) for r in got] == [(r.finish_reason, r.stop_reason) for r in expected]
    for a, b in zip(got, expected, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


@pytest.mark.timeout(120)
def test_concurrent_rows_finishing_at_different_steps_sample_as_the_dynamic_cache(model_and_tokenizer) -> None:
    """Four rows of different prompt lengths in one batch (bucket 4), greedy and seeded sampling with top-p, one
    ending on a stop string and the others on max_tokens at different steps: rows leave from the middle (their
    slots are compacted), the batch drops to smaller buckets, and the longest row crosses the 64-column width
    bucket. Tokens, finish reasons and logprobs equal the dynamic cache's."""
    tokenizer = model_and_tokenizer[1]
    prompts = [encode(tokenizer, t) for t in ("who wrote", "the capital of freedonia is the city of", "search",
                                              "browse pages and search the web")]
    probe = engine(model_and_tokenizer, static=False)
    free = asyncio.run(probe.generate(prompts[3], SamplingParams(max_tokens=12, temperature=0.0)))
    stop = tokenizer.decode(free.token_ids[4:6])
    params = [SamplingParams(max_tokens=80, temperature=0.0),
              SamplingParams(max_tokens=5, temperature=1.0, seed=3),
              SamplingParams(max_tokens=30, temperature=0.7, top_p=0.9, seed=5),
              SamplingParams(max_tokens=12, temperature=0.0, stop=[stop])]

    async def scenario(generator: LocalEngine) -> list[GenerationResult]:
        return list(await asyncio.gather(*(generator.generate(p, s) for p, s in zip(prompts, params))))

    expected, got, static = run_both(model_and_tokenizer, scenario)
    assert_same(expected, got)
    assert static.batches == [4] and static.static_steps == static.decode_steps == 79
    assert got[3].finish_reason == "stop" and len(got[3].token_ids) < 12
    assert [len(r.token_ids) for r in got[:3]] == [80, 5, 30]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("first_tokens,later_tokens", [(60, 6), (12, 40)])
def test_requests_joining_a_running_static_batch_sample_what_they_would_alone(model_and_tokenizer, first_tokens,
                                                                              later_tokens) -> None:
    """Requests arriving while a batch runs are prefilled eagerly and copied into free slots (the buffers growing from
    one slot to four); whether the first row outlives them or leaves first, every row samples what it samples
    alone over the dynamic cache."""
    tokenizer = model_and_tokenizer[1]
    first_prompt, *others = [encode(tokenizer, t) for t in ("who wrote", "the capital of freedonia is", "search")]
    long = SamplingParams(max_tokens=first_tokens, temperature=0.0)
    short = SamplingParams(max_tokens=later_tokens, temperature=1.0, seed=9)

    async def alone(generator: LocalEngine) -> list[GenerationResult]:
        return [await generator.generate(p, s) for p, s in zip([first_prompt, *others], [long, short, short])]

    async def joining(generator: LocalEngine) -> list[GenerationResult]:
        return await join_after_first(generator, [(first_prompt, long), *((p, short) for p in others)])

    expected = asyncio.run(alone(engine(model_and_tokenizer, static=False)))
    static = engine(model_and_tokenizer, static=True)
    assert_same(expected, asyncio.run(joining(static)))
    assert static.joined == 2 and static.static_steps == static.decode_steps > 0


@pytest.mark.timeout(120)
def test_sessions_reuse_keys_and_values_kept_from_the_static_cache(model_and_tokenizer) -> None:
    """Turn 2 of three concurrent sessions reuses the keys and values its turn 1 left in the static slots
    (copied out as the row finished) and samples what the dynamic cache's sessions sample, reusing as many."""
    tokenizer = model_and_tokenizer[1]
    prompts = [encode(tokenizer, t) for t in ("who wrote", "the capital of freedonia is the city of", "search")]
    observation = encode(tokenizer, " browse pages and search the web")

    async def scenario(generator: LocalEngine) -> list[GenerationResult]:
        async def session(i: int) -> list[GenerationResult]:
            params = SamplingParams(max_tokens=6 + 5 * i, temperature=0.8, seed=1, session=i)
            first = await generator.generate(prompts[i], params)
            return [first, await generator.generate(prompts[i] + first.token_ids + observation, params)]

        turns = await asyncio.gather(*(session(i) for i in range(3)))
        return [result for pair in turns for result in pair]

    dynamic = engine(model_and_tokenizer, static=False)
    expected = asyncio.run(scenario(dynamic))
    static = engine(model_and_tokenizer, static=True)
    assert_same(expected, asyncio.run(scenario(static)))
    first_turns = [len(p) + len(r.token_ids) for p, r in zip(prompts, expected[::2])]
    assert static.reused_tokens == dynamic.reused_tokens == sum(n - 1 for n in first_turns)
    assert static.static_steps == static.decode_steps > 0


@pytest.mark.timeout(120)
def test_a_row_over_the_byte_budget_moves_the_batch_to_the_dynamic_cache_and_back(model_and_tokenizer) -> None:
    """A budget of two slots of 128 columns: a running static row is moved out to a ``DynamicCache`` when a row
    needing 256 columns joins it, and back into the static slots when that row has stopped and another short
    one joins; every row samples what it samples alone over the dynamic cache."""
    model, tokenizer = model_and_tokenizer
    short_prompt, long_prompt, late_prompt = (encode(tokenizer, t) for t in ("who wrote", "search the web", "the"))
    probe = engine(model_and_tokenizer, static=False)
    free = asyncio.run(probe.generate(long_prompt, SamplingParams(max_tokens=8, temperature=0.0)))
    short = SamplingParams(max_tokens=110, temperature=0.0)  # needs <= 128 columns
    long = SamplingParams(max_tokens=200, temperature=0.0, stop=[tokenizer.decode(free.token_ids[:3])])  # stops early
    late = SamplingParams(max_tokens=20, temperature=1.0, seed=2)
    requests = [(short_prompt, short), (long_prompt, long), (late_prompt, late)]

    async def alone(generator: LocalEngine) -> list[GenerationResult]:
        return [await generator.generate(p, s) for p, s in requests]

    async def interleaved(generator: LocalEngine) -> list[GenerationResult]:
        first = asyncio.ensure_future(generator.generate(*requests[0]))
        while not generator.decode_steps:  # the short row decodes over the static cache
            await asyncio.sleep(0.001)
        stopped = await generator.generate(*requests[1])
        late_result = await generator.generate(*requests[2])
        return [await first, stopped, late_result]

    per_token = 2 * 2 * 2 * (32 // 4) * model.dtype.itemsize  # layers x (keys, values) x kv heads x head dim
    static = engine(model_and_tokenizer, static=True, static_cache_bytes=2 * 128 * per_token)
    expected = asyncio.run(alone(engine(model_and_tokenizer, static=False)))
    got = asyncio.run(interleaved(static))
    assert_same(expected, got)
    assert got[1].finish_reason == "stop" and len(got[0].token_ids) == 110
    assert static.joined == 2
    assert 0 < static.static_steps < static.decode_steps, "both caches decoded"
    assert static._static is not None and (static._static.slots, static._static.columns) == (2, 128)


@pytest.mark.timeout(300)
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU")
def test_cuda_graphs_replay_what_the_dynamic_cache_samples_and_follow_swapped_weights(checkpoint: Path) -> None:
    """On a GPU: concurrent and joining rows decoded by replayed graphs sample what the dynamic cache does;
    after weights are copied in place (as ``EngineWeightTransfer`` does) and after one is moved to new storage,
    the graphs sample with the new weights, not the captured ones."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).to("cuda").eval()
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    prompts = [encode(tokenizer, t) for t in ("who wrote", "the capital of freedonia is the city of", "search")]
    params = [SamplingParams(max_tokens=n, temperature=t, seed=i) for i, (n, t) in enumerate([(70, 0.0), (9, 1.0),
                                                                                               (40, 0.7)])]

    async def scenario(generator: LocalEngine) -> list[GenerationResult]:
        return await join_after_first(generator, list(zip(prompts, params)))

    graphed = LocalEngine(model, tokenizer, batch_wait_s=0.05, seed=4)

    def compare() -> None:
        expected = asyncio.run(scenario(LocalEngine(model, tokenizer, batch_wait_s=0.05, seed=4, cuda_graphs=False)))
        assert_same(expected, asyncio.run(scenario(graphed)))
        assert graphed.cuda_graphs and graphed.static_steps == graphed.decode_steps > 0

    compare()
    captured = dict(graphed._static._graphs)
    assert captured, "the steps were replayed from graphs"
    weight = model.get_output_embeddings().weight
    with torch.no_grad():
        weight.copy_(weight.flip(0))  # in place: the graphs captured before read the new values
    compare()
    assert all(graphed._static._graphs.get(key) is graph for key, graph in captured.items()), "not captured anew"
    with torch.no_grad():
        weight.data = weight.data.roll(1, 0).clone()  # new storage: the graphs must be captured anew
    compare()
    assert not any(graphed._static._graphs.get(key) is graph for key, graph in captured.items())
