"""The LLM judge over real HTTP to the OpenAI-compatible emulator: exact matches, verdicts, cache, failures."""

from __future__ import annotations

import pytest

from deepresearcher.config import LLMClientConfig
from deepresearcher.eval.judge import Judge, parse_verdict
from deepresearcher.llm import make_chat_client
from deepresearcher.testing.openai_server import OpenAIEmulator, Reply
from deepresearcher.web.cache import WebCache


def _client(server: OpenAIEmulator, **kw):
    return make_chat_client(LLMClientConfig(kind="openai", base_url=server.base_url, model="judge-emu", **kw))


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("True", True), ("false", False), ("**Correct.**", True), ("Incorrect: it names the city", False),
     ("Answer: TRUE\n", True), ("yes", True), ("No.", False), ("I cannot tell", None), ("", None),
     ("Untrue? truest", None)],
)
def test_parse_verdict_reads_the_first_decisive_word(reply, expected):
    """Case, markdown and punctuation do not matter; words that merely contain true/false do not count."""
    assert parse_verdict(reply) is expected


async def test_exact_match_and_empty_answers_never_reach_the_model():
    """EM (after normalization, any alias) is correct without a call; no answer is incorrect without a call."""
    with OpenAIEmulator([Reply(text="False")]).running() as server:
        judge = Judge(_client(server))
        try:
            assert (await judge.judge("Capital of France?", "the PARIS.", ["City of Paris", "Paris"])).by == "exact"
            assert (await judge.judge("Capital of France?", None, ["Paris"])).by == "no_answer"
            assert (await judge.judge("Capital of France?", "  ", ["Paris"])).correct is False
            assert server.requests == []
        finally:
            await judge.aclose()


async def test_model_verdicts_and_prompt_content():
    """A non-exact answer is sent with question, golds and answer; the reply decides."""
    script = [Reply(text="True"), Reply(text="False"), Reply(text="As an AI I cannot judge.")]
    with OpenAIEmulator(script).running() as server:
        judge = Judge(_client(server))
        try:
            first = await judge.judge("Who was the 35th US president?", "JFK", ["John F. Kennedy"])
            second = await judge.judge("Who was the 35th US president?", "Nixon", ["John F. Kennedy"])
            third = await judge.judge("Who was the 35th US president?", "Lincoln", ["John F. Kennedy"])
        finally:
            await judge.aclose()
    assert (first.correct, first.by) == (True, "model")
    assert (second.correct, second.by) == (False, "model")
    assert (third.correct, third.by, third.reply) == (False, "unparsed", "As an AI I cannot judge.")
    prompt = server.requests[0]["messages"][-1]["content"]
    assert "Who was the 35th US president?" in prompt and "John F. Kennedy" in prompt and "JFK" in prompt
    assert server.requests[0]["temperature"] == 0.0


async def test_verdicts_are_cached_across_judges(tmp_path):
    """A second judge on the same cache file answers from the record: no second request."""
    path = tmp_path / "cache.sqlite"
    with OpenAIEmulator([Reply(text="True")], responder=lambda body: Reply(text="False")).running() as server:
        for _ in range(2):
            cache = WebCache(path)
            judge = Judge(_client(server), cache=cache)
            try:
                verdict = await judge.judge("Who wrote Dune?", "Herbert", ["Frank Herbert"])
            finally:
                await judge.aclose()  # closes the cache too
            assert (verdict.correct, verdict.by) == (True, "model")
        assert len(server.requests) == 1
        stats = WebCache(path).stats().to_dict()
    assert "judge" in str(stats)


async def test_a_failing_judge_gives_an_error_verdict_not_an_exception():
    """A server that keeps answering 500 marks the rollout incorrect (by=error); the eval goes on."""
    with OpenAIEmulator(responder=lambda body: Reply(status=500)).running() as server:
        judge = Judge(_client(server, max_retries=0))
        try:
            verdict = await judge.judge("Who wrote Dune?", "Herbert", ["Frank Herbert"])
        finally:
            await judge.aclose()
    assert (verdict.correct, verdict.by) == (False, "error")
