"""The local transformers generator: batching concurrent requests must not change what each one gets."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

torch = pytest.importorskip("torch")

from deepresearcher.config import TinyModelConfig
from deepresearcher.errors import GenerationError
from deepresearcher.generate.base import SamplingParams
from deepresearcher.inference.engine import LocalEngine
from deepresearcher.quickstart.tiny_model import build_tiny_checkpoint

TEXTS = ["the capital of freedonia is fredville", "search the web and browse pages", "who wrote the book"] * 20


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.set_num_threads(1)
    spec = TinyModelConfig(vocab_size=300, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2,
                           intermediate_size=64, max_positions=256)
    return build_tiny_checkpoint(TEXTS, tmp_path_factory.mktemp("tiny"), spec, seed=3)


@pytest.fixture
def generator(checkpoint):
    return LocalEngine.from_pretrained(str(checkpoint), batch_wait_s=0.05, seed=0)


def prompts(generator) -> list[list[int]]:
    encode = lambda text: generator.tokenizer(text, add_special_tokens=False)["input_ids"]
    return [encode("who wrote"), encode("the capital of freedonia is the city of"), encode("search")]


async def test_batched_greedy_equals_each_alone(generator):
    """Concurrent requests share one left-padded batch and get the tokens each would get alone."""
    greedy = [SamplingParams(max_tokens=n, temperature=0.0) for n in (5, 9, 7)]
    batched = await asyncio.gather(*(generator.generate(p, s) for p, s in zip(prompts(generator), greedy)))
    assert generator.batches == [3]
    alone = [await generator.generate(p, s) for p, s in zip(prompts(generator), greedy)]
    assert generator.batches == [3, 1, 1, 1]
    for a, b, s in zip(batched, alone, greedy):
        assert a.token_ids == b.token_ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
        assert len(a.token_ids) <= s.max_tokens
        assert a.finish_reason == ("length" if len(a.token_ids) == s.max_tokens and a.stop_reason is None else "stop")
    await generator.aclose()


async def test_logprobs_are_those_of_the_sampled_tokens(generator):
    """Each returned logprob equals the model's log-softmax (at the sampling temperature) of that token."""
    prompt = prompts(generator)[1]
    result = await generator.generate(prompt, SamplingParams(max_tokens=8, temperature=0.7))
    full = torch.tensor([prompt + result.token_ids], device=generator.model.device)  # where the loader put it
    with torch.no_grad():
        logits = generator.model(full).logits[0, len(prompt) - 1 : -1] / 0.7
    sampled = torch.tensor(result.token_ids, device=logits.device)
    expected = torch.log_softmax(logits, -1).gather(-1, sampled.unsqueeze(-1)).squeeze(-1)
    assert result.logprobs == pytest.approx(expected.tolist(), abs=1e-4)
    await generator.aclose()


async def test_stop_string_ends_the_request_and_is_kept(generator):
    """A stop string ends the turn right after the token that completes it; that token stays in the output."""
    prompt = prompts(generator)[0]
    free = await generator.generate(prompt, SamplingParams(max_tokens=12, temperature=0.0))
    text = generator.tokenizer.decode(free.token_ids)
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    assert stop.strip()
    cut = await generator.generate(prompt, SamplingParams(max_tokens=12, temperature=0.0, stop=[stop]))
    assert cut.finish_reason == "stop" and cut.stop_reason == stop
    assert stop in generator.tokenizer.decode(cut.token_ids)
    assert stop not in generator.tokenizer.decode(cut.token_ids[:-1])
    assert cut.token_ids == free.token_ids[: len(cut.token_ids)]
    await generator.aclose()


@pytest.mark.parametrize("first_tokens,later_tokens", [(60, 6), (12, 40)])
async def test_requests_join_a_running_batch_and_get_what_they_would_alone(generator, first_tokens, later_tokens):
    """A request arriving mid-decode joins the running batch at the next step; nobody's tokens change,
    whether the first row outlives the newcomers or leaves first (and its cache columns are trimmed)."""
    long = SamplingParams(max_tokens=first_tokens, temperature=0.0)
    short = SamplingParams(max_tokens=later_tokens, temperature=0.0)
    first_prompt, *others = prompts(generator)
    # The first request's prefill waits until the newcomers are queued: a tiny model decodes a dozen tokens
    # in milliseconds, so without the hold the first row could finish before anyone arrives to join it.
    queued = threading.Event()

    def hold_until_queued(*_) -> None:  # returns None: the forward's arguments stay as they are
        queued.wait(timeout=30)

    hold = generator.model.register_forward_pre_hook(hold_until_queued)
    first = asyncio.ensure_future(generator.generate(first_prompt, long))
    while not generator.batches:  # the first request is admitted (its prefill held)
        await asyncio.sleep(0.001)
    newcomers = [asyncio.ensure_future(generator.generate(p, short)) for p in others]
    await asyncio.sleep(0)  # each newcomer runs up to its wait for a result: it is queued
    queued.set()
    hold.remove()
    joined = await asyncio.gather(*newcomers)
    first_result = await first
    assert generator.joined == len(others)
    alone = [await generator.generate(p, s) for p, s in zip([first_prompt, *others], [long, short, short])]
    assert [r.token_ids for r in [first_result, *joined]] == [r.token_ids for r in alone]
    for together, solo in zip([first_result, *joined], alone):
        assert together.logprobs == pytest.approx(solo.logprobs, abs=1e-4)
    await generator.aclose()


async def test_a_model_failure_fails_every_waiting_request_and_the_generator_recovers(generator):
    """An id outside the vocabulary breaks the forward pass: each request of that batch gets a GenerationError."""
    bad = [len(generator.tokenizer) + 10_000]
    good = prompts(generator)[0]
    results = await asyncio.gather(generator.generate(bad, SamplingParams(max_tokens=3)),
                                   generator.generate(good, SamplingParams(max_tokens=3)), return_exceptions=True)
    assert all(isinstance(r, GenerationError) for r in results)
    again = await generator.generate(good, SamplingParams(max_tokens=3, temperature=0.0))
    assert len(again.token_ids) <= 3
    await generator.aclose()


async def _sample_all(generator) -> list:
    params = [SamplingParams(max_tokens=12, temperature=1.0, seed=7, session=100 + i) for i in range(3)]
    return await asyncio.gather(*(generator.generate(p, s) for p, s in zip(prompts(generator), params)))


def test_run_driving_decodes_on_the_calling_thread_and_samples_what_the_decode_thread_does(checkpoint):
    """A trainer's thread that drives the engine runs every forward pass itself, while the agent's event
    loop runs on a helper thread; what each request samples is what the engine's own thread samples."""
    own_thread = LocalEngine.from_pretrained(str(checkpoint), batch_wait_s=0.05, seed=0)
    expected = asyncio.run(_sample_all(own_thread))

    driven = LocalEngine.from_pretrained(str(checkpoint), batch_wait_s=0.05, seed=0)
    forward_threads: set[int] = set()
    driven.model.register_forward_pre_hook(lambda *_: forward_threads.add(threading.get_ident()))
    loop = asyncio.new_event_loop()
    try:
        got = driven.run_driving(loop, _sample_all(driven))
        assert forward_threads == {threading.get_ident()}
        assert [r.token_ids for r in got] == [r.token_ids for r in expected]
        for a, b in zip(got, expected, strict=True):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)

        forward_threads.clear()  # outside run_driving the engine decodes on its own thread again
        again = asyncio.run(driven.generate(prompts(driven)[0], SamplingParams(max_tokens=3, temperature=0.0)))
        assert len(again.token_ids) <= 3 and forward_threads and threading.get_ident() not in forward_threads
    finally:
        loop.close()


def test_run_driving_hands_back_the_coroutines_error(checkpoint):
    """A failing rollout coroutine raises in the driving thread, which then returns instead of waiting."""
    generator = LocalEngine.from_pretrained(str(checkpoint), batch_wait_s=0.01, seed=0)

    async def fails() -> None:
        await generator.generate(prompts(generator)[0], SamplingParams(max_tokens=2, temperature=0.0))
        raise ValueError("a tool broke")

    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(ValueError, match="a tool broke"):
            generator.run_driving(loop, fails())
        assert generator.run_driving(loop, asyncio.sleep(0, result="still usable")) == "still usable"
    finally:
        loop.close()


async def test_a_request_arriving_while_a_failure_is_handled_is_served_not_stranded(generator, monkeypatch):
    """A request made while the decode thread answers a failed batch (a caller retrying at once) is decoded by a
    new thread: it never waits on the thread that is going away (seen as a hang under load), nor inherits the
    failure it had no part in (seen as a flaky retry)."""
    from deepresearcher.inference import engine as engine_module

    loop = asyncio.get_running_loop()
    late: list[asyncio.Future] = []
    deliver = engine_module._Row.deliver

    def enqueue_then_deliver(row, result):
        if isinstance(result, BaseException) and not late:  # on the decode thread, inside its failure path
            late.append(asyncio.run_coroutine_threadsafe(
                generator.generate(prompts(generator)[0], SamplingParams(max_tokens=3, temperature=0.0)), loop))
        deliver(row, result)

    monkeypatch.setattr(engine_module._Row, "deliver", enqueue_then_deliver)
    with pytest.raises(GenerationError):
        await generator.generate([len(generator.tokenizer) + 10_000], SamplingParams(max_tokens=3))
    served = await asyncio.wait_for(asyncio.wrap_future(late[0]), timeout=30)
    assert len(served.token_ids) >= 1
    await generator.aclose()
