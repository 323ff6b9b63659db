"""The DeepResearcher columns of an eval (EM, F1, MBE) against the original evaluation script, case by case.

The original's ``compute_score`` (``evaluate/cacluate_metrics.py``) and ``eval.runner.judge_trajectory`` score
the same responses; both ask the same real OpenAI-compatible judge on loopback (the original's
``call_gpt_4o_mini`` is pointed at it), and the requests each sends must be the same, byte for byte.
"""

from __future__ import annotations

import json
import urllib.request
from collections import Counter

import pytest

from deepresearcher.agent.trajectory import Trajectory, TurnRecord
from deepresearcher.config import LLMClientConfig, load_config
from deepresearcher.data import record_to_task
from deepresearcher.eval.judge import Judge
from deepresearcher.eval.runner import judge_trajectory
from deepresearcher.llm import make_chat_client
from deepresearcher.testing.openai_server import OpenAIEmulator, Reply

PROMPT = ("<|im_start|>system\nAnswer in <think></think><answer></answer> tags.<|im_end|>\n"
          "<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
"""The original's initial prompt (shortened; its system turn names the tags, which must not count)."""
OPEN = "<|im_start|>assistant\n"
CALL = '<tool_call>\n{"name": "web_search", "arguments": {"query": ["q"]}}\n</tool_call>'
OBSERVATION = "<|im_end|>\n<|im_start|>user\n<tool_response>\n[]\n</tool_response><|im_end|>\n" + OPEN

# (name, question, ground truth as the row holds it, response after the prompt without the prefilled <think>)
CASES = [
    ("articles are kept", "Which band recorded Abbey Road?", "The Beatles", "a</think>\n<answer>Beatles</answer>"),
    ("hyphens split words", "Who wrote Nausea?", "Jean-Paul Sartre", "a</think>\n<answer>Jean Paul Sartre</answer>"),
    ("two answers", "Capital of France?", "Paris", "a</think>\n<answer>Lyon</answer><answer>Paris</answer>"),
    ("a tool call after the answer", "Capital of France?", "Paris", f"a</think>\n<answer>Paris, France</answer>{CALL}"),
    ("an empty answer", "Capital of France?", "Paris", "a</think>\n<answer></answer>"),
    ("an answer that normalizes to nothing", "Which band?", "The Beatles", "a</think>\n<answer>The</answer>"),
    ("tags in capitals", "Capital of France?", "Paris", "a</think>\n<ANSWER>PARIS</ANSWER>"),
    ("an earlier answer, a later one", "Capital of France?", "Paris",
     f"a</think>\n<answer>Lyon</answer>{CALL}{OBSERVATION}<think>b</think>\n<answer>Paris, France</answer><|im_end|>"),
    ("cut by max_turns", "Capital of France?", "Paris", f"a</think>\n{CALL}{OBSERVATION}"),
    ("an unclosed think", "Capital of France?", "Paris", "a\n<think>b</think><answer>Paris</answer>"),
    ("a question with a trailing space", "Which planet is largest? ", "Jupiter", "a</think>\n<answer>Saturn</answer>"),
    ("golds repeated and spaced", "Who was king?", "George VI\n<|answer_split|>Albert<|answer_split|>Albert",
     "a</think>\n<answer>Bertie</answer>"),
    ("punctuation in the answer", "Who was the 35th US president?", "John F. Kennedy",
     "a</think>\n<answer>J.F.K.</answer>"),
]


class Judgements:
    """A judge that answers each distinct prompt: first with no verdict, then ``" Correct "`` (the original
    does not accept it), then its verdict; ``correct`` when the shown answer shares a word with a gold."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    def __call__(self, body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        self.seen[prompt] += 1
        turn = self.seen[prompt]
        if turn == 1:
            return Reply(text="Let me think about it.")
        if turn == 2:
            return Reply(text='{"rationale": "close", "judgement": " Correct "}')
        golds = prompt.split("ground truth answers: ")[1].split("\npred_answer: ")[0]
        answer = prompt.split("pred_answer: ")[1].split("\n")[0]
        verdict = "correct" if set(answer.split()) & set(golds.replace("'", " ").split()) else "incorrect"
        return Reply(text=f'```json\n{{"rationale": "checked", "judgement": "{verdict}"}}\n```')


@pytest.fixture
def judge_server():
    judgements = Judgements()
    with OpenAIEmulator(responder=judgements).running() as server:
        server.judgements = judgements
        yield server


@pytest.fixture
def original(reference_functions, judge_server):
    """The original evaluation script, its judge call sent to the loopback server as it sent it."""
    script = reference_functions("evaluate/cacluate_metrics.py")

    def call_gpt_4o_mini(prompt: str) -> str:
        body = {"model": "gpt-4o-mini", "temperature": 0.7,
                "messages": [{"role": "system", "content": "You are a helpful assistant."},
                             {"role": "user", "content": prompt}]}
        request = urllib.request.Request(f"{judge_server.base_url}/chat/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())["choices"][0]["message"]["content"]

    script.get_mbe_result.__globals__["call_gpt_4o_mini"] = call_gpt_4o_mini
    return script


def _requests(server: OpenAIEmulator) -> list[tuple[str, list, float]]:
    return [(r["messages"][-1]["content"], r["messages"], r["temperature"]) for r in server.requests]


@pytest.mark.parametrize(("name", "question", "truth", "response"), CASES, ids=[c[0] for c in CASES])
async def test_eval_columns_and_judge_requests_equal_the_originals(original, judge_server, name, question, truth,
                                                                   response) -> None:
    row = {"data_source": "hotpotqa", "prompt": [{"role": "user", "content": question}],
           "reward_model": {"ground_truth": truth}, "extra_info": {"index": "hotpotqa_1"}}
    conversation = PROMPT.format(question=question) + "<think>" + response
    expected = {metric: original.compute_score(question, conversation, truth, metric) for metric in ("em", "f1", "mbe")}
    theirs = _requests(judge_server)
    judge_server.requests.clear()
    judge_server.judgements.seen.clear()

    task = record_to_task(row)
    turns = [TurnRecord(text=t) for t in response.split(OBSERVATION + "<think>")]
    trajectory = Trajectory(turns=turns, response_text="<think>" + response)
    judge = Judge(make_chat_client(LLMClientConfig(kind="openai", base_url=judge_server.base_url, model="judge-emu")))
    try:
        record = await judge_trajectory(trajectory, task, judge, load_config())
    finally:
        await judge.aclose()

    assert (record["deepresearcher_em"], record["deepresearcher_f1"], record["mbe"]) == pytest.approx(
        (expected["em"], expected["f1"], expected["mbe"]))
    assert _requests(judge_server) == theirs
    assert record["judge_asked"] == len(theirs) and record["judge_unparsed"] == max(len(theirs) - 1, 0)


def test_the_cases_reach_the_judge_where_the_original_asked_it(original, judge_server) -> None:
    """Every case that gets past the gate without an exact match is judged, empty and article-only answers too."""
    asked = []
    for name, question, truth, response in CASES:
        before = len(judge_server.requests)
        original.compute_score(question, PROMPT.format(question=question) + "<think>" + response, truth, "mbe")
        if len(judge_server.requests) > before:
            asked.append(name)
    assert {"two answers", "a tool call after the answer", "an empty answer", "an answer that normalizes to nothing",
            "an earlier answer, a later one", "a question with a trailing space", "golds repeated and spaced"} <= set(asked)
    assert "cut by max_turns" not in asked and "hyphens split words" not in asked


async def test_mbe_is_filled_whatever_the_judge_prompt(judge_server) -> None:
    """With ``eval.judge_prompt: rearter`` the judge column is ReARTeR's verdict on our answer and the MBE column
    still the paper's, from the same model; both calls are counted."""
    row = {"prompt": [{"role": "user", "content": "Capital of France?"}], "reward_model": {"ground_truth": "Paris"}}
    response = "a</think>\n<answer>Lyon</answer><answer>Paris</answer>"  # our format check: no answer
    trajectory = Trajectory(turns=[TurnRecord(text=response)], response_text="<think>" + response)
    client = make_chat_client(LLMClientConfig(kind="openai", base_url=judge_server.base_url, model="judge-emu"))
    judge = Judge(client, prompt="rearter")
    try:
        record = await judge_trajectory(trajectory, record_to_task(row), judge,
                                        load_config(overrides=["eval.judge_prompt=rearter"]))
    finally:
        await judge.aclose()
    assert (record["judge"], record["judge_by"]) == (0.0, "no_answer")
    assert (record["mbe"], record["mbe_by"], record["original_answer"]) == (0.0, "model", "lyon")
    assert record["judge_asked"] == 3 and record["judge_unparsed"] == 2
    assert all("pred_answer: lyon" in r["messages"][-1]["content"] for r in judge_server.requests)
