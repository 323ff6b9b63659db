"""The LLM judge over real HTTP to the OpenAI-compatible emulator: both prompts, exact matches, verdicts, cache, failures."""

from __future__ import annotations

import pytest

from deepresearcher.config import LLMClientConfig
from deepresearcher.eval.judge import JUDGE_PROMPTS, MBE_PROMPT, MBE_SYSTEM, Judge, parse_mbe, parse_verdict
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
        judge = Judge(_client(server), prompt="rearter")
        try:
            assert (await judge.judge("Capital of France?", "the PARIS.", ["City of Paris", "Paris"])).by == "exact"
            assert (await judge.judge("Capital of France?", None, ["Paris"])).by == "no_answer"
            assert (await judge.judge("Capital of France?", "  ", ["Paris"])).correct is False
            assert server.requests == []
        finally:
            await judge.aclose()


async def test_rearter_verdicts_and_prompt_content():
    """ReARTeR's prompt: a non-exact answer is sent with question, golds and answer; the True/False reply decides."""
    script = [Reply(text="True"), Reply(text="False"), Reply(text="As an AI I cannot judge.")]
    with OpenAIEmulator(script).running() as server:
        judge = Judge(_client(server), prompt="rearter")
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
            judge = Judge(_client(server), cache=cache, prompt="rearter")
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


MBE_CORRECT = '```json\n{"rationale": "JFK is John F. Kennedy", "judgement": "correct"}\n```'
MBE_WRONG = '{"rationale": "another president", "judgement": "incorrect"}'


def test_the_mbe_prompt_is_the_papers(reference_functions):
    """The default prompt is the original evaluation script's text, character for character."""
    assert MBE_PROMPT == reference_functions("evaluate/cacluate_metrics.py").PROMPT


async def test_mbe_requests_are_the_papers(reference_functions):
    """System turn, temperature 0.7, and the prompt the original fills: lower-cased golds as a list, its normalized answer."""
    original = reference_functions("evaluate/cacluate_metrics.py")
    question, answer, golds = "Who was the 35th US president?", "J.F.K., Jr.?", ["John F. Kennedy", "JFK"]
    with OpenAIEmulator([Reply(text=MBE_CORRECT)]).running() as server:
        judge = Judge(_client(server))
        try:
            verdict = await judge.judge(question, answer, golds)
        finally:
            await judge.aclose()
    assert (verdict.correct, verdict.by) == (True, "model")
    (request,) = server.requests
    expected = (original.PROMPT.replace("{question}", question).replace("{gt_answer}", str([g.lower() for g in golds]))
                .replace("{pred_answer}", original.preprocess_text(answer.lower())))
    assert request["messages"] == [{"role": "system", "content": MBE_SYSTEM}, {"role": "user", "content": expected}]
    assert request["temperature"] == 0.7


async def test_mbe_exact_match_uses_the_papers_normalization():
    """Equal after punctuation-to-space (hyphens split words) is correct without a call, as in the paper."""
    with OpenAIEmulator([Reply(text=MBE_WRONG)]).running() as server:
        judge = Judge(_client(server))
        try:
            assert (await judge.judge("Who wrote Nausea?", "Jean Paul Sartre", ["Jean-Paul Sartre"])).by == "exact"
            assert server.requests == []
            assert (await judge.judge("Which band?", "Beatles", ["The Beatles"])).by == "model"  # articles are kept
        finally:
            await judge.aclose()


async def test_mbe_asks_again_until_a_reply_holds_a_judgement():
    """A reply without the JSON verdict is asked again, up to the bound; then the answer is unparsed (incorrect).
    Each verdict says how many calls it took and how many replies held no verdict."""
    script = [Reply(text="Let me think."), Reply(text='{"judgement": "Correct"}'), Reply(text=MBE_WRONG),
              *[Reply(text="no json")] * 5]
    with OpenAIEmulator(script).running() as server:
        judge = Judge(_client(server), attempts=5)
        try:
            third = await judge.judge("Who was the 35th US president?", "Nixon", ["John F. Kennedy"])
            never = await judge.judge("Who was the 35th US president?", "Lincoln", ["John F. Kennedy"])
        finally:
            await judge.aclose()
    assert (third.correct, third.by, third.asked, third.unparsed) == (False, "model", 3, 2)
    assert (never.correct, never.by, never.reply, never.asked, never.unparsed) == (False, "unparsed", "no json", 5, 5)
    assert len(server.requests) == 8
    assert JUDGE_PROMPTS["deepresearcher"].attempts == 100  # the paper's prompt: asked until it answers, bounded


@pytest.mark.parametrize(
    ("reply", "expected"),
    [(MBE_CORRECT, True), (MBE_WRONG, False), ('{"judgement": " Correct "}', None), ('{"judgement": "partly"}', None),
     ("correct", None), ("{not json}", None), ('["correct"]', None)],
)
def test_parse_mbe_reads_the_json_judgement(reply, expected):
    """Only a JSON object's ``judgement``, exactly ``correct`` or ``incorrect`` as the original required, decides."""
    assert parse_mbe(reply) is expected


async def test_the_grounding_judge_reads_the_observations_and_is_cached(tmp_path):
    """``supported``: the question, the observations (cut to ``GROUNDING_EVIDENCE_CHARS``) and the answer at
    temperature 0; True/False decides, anything else is no label; a second ask on the same cache costs nothing."""
    from deepresearcher.eval.judge import GROUNDING_EVIDENCE_CHARS, supported

    path = tmp_path / "cache.sqlite"
    evidence = "Dune is a novel by Frank Herbert. " + "x" * (2 * GROUNDING_EVIDENCE_CHARS)
    with OpenAIEmulator([Reply(text="True"), Reply(text="I cannot tell")]).running() as server:
        for _ in range(2):
            judge = Judge(_client(server), cache=WebCache(path))
            try:
                verdict = await supported(judge, "Who wrote Dune?", "Frank Herbert", evidence)
            finally:
                await judge.aclose()
            assert (verdict.correct, verdict.by) == (True, "model")
        judge = Judge(_client(server))
        try:
            unclear = await supported(judge, "Who wrote Dune?", "Tolkien", evidence)
        finally:
            await judge.aclose()
    assert (unclear.correct, unclear.by, unclear.unparsed) == (False, "unparsed", 1)
    assert len(server.requests) == 2 and server.requests[0]["temperature"] == 0.0
    prompt = server.requests[0]["messages"][-1]["content"]
    assert "Question: Who wrote Dune?" in prompt and "Answer: Frank Herbert" in prompt and "by Frank Herbert" in prompt
    assert len(prompt) < GROUNDING_EVIDENCE_CHARS + 1000
