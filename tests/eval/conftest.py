"""Fixtures for eval tests: a scripted /v1/completions policy server on loopback, questions, a tiny index."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from deepresearcher.data import QATask, write_verl_parquet
from deepresearcher.testing._serve import serve_in_thread

# question -> the answer the scripted policy gives (some right, some wrong, one never answers)
QUESTIONS: dict[str, tuple[list[str], str | None]] = {
    "Which city is the capital of France?": (["Paris"], "Paris"),
    "Who wrote the novel Dune?": (["Frank Herbert"], "Herbert"),
    "What is the largest planet?": (["Jupiter"], "Saturn"),
    "Which river flows through Cairo?": (["Nile", "Nile River"], None),
}


class CompletionsPolicy:
    """A /v1/completions server that plays a researcher: one search, then its scripted answer.

    ``delay_s`` slows every reply (to kill an eval mid-way); ``requests`` counts calls per question.
    """

    def __init__(self, answers: dict[str, str | None], delay_s: float = 0.0) -> None:
        self.answers, self.delay_s = answers, delay_s
        self.requests: dict[str, int] = {}
        self.seeds: set[int | None] = set()
        self.base_url = ""

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        prompt = body["prompt"]
        question = next((q for q in self.answers if q in prompt), "")
        self.requests[question] = self.requests.get(question, 0) + 1
        self.seeds.add(body.get("seed"))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        answer = self.answers.get(question)
        if "<tool_response>" not in prompt:
            call = {"name": "web_search", "arguments": {"query": [question]}}
            text = f"I should search for this.</think>\n<tool_call>\n{json.dumps(call)}\n"  # the prompt ends with <think>
        elif answer is None:
            text = "I keep looking.</think>\n<tool_call>\n" + json.dumps(
                {"name": "browse_webpage", "arguments": {"url_list": ["https://example.org/nile"]}}) + "\n"
        else:
            text = f"The pages say so.</think>\n<answer>{answer}</answer>"
        return web.json_response({"choices": [{"index": 0, "text": text, "finish_reason": "stop"}]})

    @classmethod
    def serving(cls, answers: dict[str, str | None], delay_s: float = 0.0) -> Iterator[CompletionsPolicy]:
        server = cls(answers, delay_s)
        app = web.Application()
        app.router.add_post("/v1/completions", server._complete)
        with serve_in_thread(app, "completions-policy") as url:
            server.base_url = url + "/v1"
            yield server


@pytest.fixture
def policy_server() -> Iterator[CompletionsPolicy]:
    yield from CompletionsPolicy.serving({q: a for q, (_, a) in QUESTIONS.items()})


@pytest.fixture
def slow_policy() -> Iterator[CompletionsPolicy]:
    """A policy that answers ten coded questions, a quarter second per reply, slow enough to be killed mid-eval."""
    answers = {f"What is the code of item number {i}?": f"code {i}" for i in range(10)}
    yield from CompletionsPolicy.serving(answers, delay_s=0.25)


@pytest.fixture
def no_sayer() -> Iterator[CompletionsPolicy]:
    """A policy that searches once, then answers "no" to every question ("" is in every prompt)."""
    yield from CompletionsPolicy.serving({"": "no"})


@pytest.fixture(scope="session")
def qa_file(tmp_path_factory) -> Path:
    """The QUESTIONS as DeepResearcher's verl parquet: two nq rows, two hotpotqa rows."""
    tasks = [QATask(id=f"q{i}", source="nq" if i < 2 else "hotpotqa", question=q, golds=golds)
             for i, (q, (golds, _)) in enumerate(QUESTIONS.items())]
    return write_verl_parquet(tasks, tmp_path_factory.mktemp("qa") / "dev.parquet")


@pytest.fixture(scope="session")
def tiny_index(tmp_path_factory) -> Path:
    from deepresearcher.web.backends.local_build import build_index

    docs = [
        {"url": "https://example.org/paris", "title": "Paris", "text": "Paris is the capital of France."},
        {"url": "https://example.org/dune", "title": "Dune", "text": "Dune is a novel by Frank Herbert."},
        {"url": "https://example.org/nile", "title": "Nile", "text": "The Nile flows through Cairo."},
    ]
    out = tmp_path_factory.mktemp("index") / "index"
    build_index(docs, out)
    return out


@pytest.fixture(scope="session")
def tokenizer_dir(request, tmp_path_factory) -> Path:
    """The eval's cache dir, holding the offline Qwen2.5 tokenizer the eval loads (kept in pytest's cache when on)."""
    from deepresearcher.inference.embedded import load_qwen25_tokenizer

    cache = getattr(request.config, "cache", None)
    root = Path(cache.mkdir("deepresearcher-eval-cache")) if cache is not None else tmp_path_factory.mktemp("c")
    load_qwen25_tokenizer(root)
    return root


@pytest.fixture
def make_policy(policy_server, qwen_tokenizer):
    """A fresh (generator, tokenizer) pair on the scripted server for each ``run_eval`` (it closes the generator);
    loading the 150k-token tokenizer once per session keeps these tests fast."""
    from deepresearcher.generate.openai_gen import OpenAITextGenerator

    return lambda: (OpenAITextGenerator(policy_server.base_url, qwen_tokenizer, "scripted"), qwen_tokenizer)


def overrides_for(server: CompletionsPolicy, index: Path, cache_dir: Path) -> list[str]:
    """Config overrides for an eval against the scripted policy server and the tiny index."""
    return [
        f"agent.policy=openai:{server.base_url}", "agent.policy_model=scripted", "agent.tokenizer=qwen2.5",
        f"search.index={index}", f"cache_dir={cache_dir}", "agent.max_turns=3", "cache.mode='off'",
    ]


@pytest.fixture
def questions() -> dict[str, tuple[list[str], str | None]]:
    return QUESTIONS


@pytest.fixture
def eval_overrides(policy_server, tiny_index, tokenizer_dir) -> list[str]:
    return overrides_for(policy_server, tiny_index, tokenizer_dir)


@pytest.fixture
def world_eval_overrides(no_sayer, small_world, tokenizer_dir) -> list[str]:
    """An eval of the "no"-saying policy on the small world's test split, searching the world's index
    (``tokenizer_dir`` holds the tokenizer the eval loads)."""
    return [*overrides_for(no_sayer, small_world / "index", tokenizer_dir), f"world.dir={small_world}",
            "eval.benchmarks=[world]"]
