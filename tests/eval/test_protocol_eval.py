"""``deepresearcher eval --policy vllm:<server> --set agent.protocol=deepresearcher``, end to end on the CPU:
the real command, a loopback server speaking vLLM's token-id dialect that plays the published checkpoint's
part, the real local index and extractive reader, and the original protocol on the wire."""

from __future__ import annotations

import datetime as dt
import json
import re

import orjson
from typer.testing import CliRunner

from deepresearcher.agent.protocols import deepresearcher as original
from deepresearcher.cli.main import app
from deepresearcher.testing.vllm_server import VLLMPolicyEmulator

ANSWERS = {  # question -> the checkpoint's answer; None: a malformed turn after the search
    "Which city is the capital of France?": "Paris",
    "Who wrote the novel Dune?": "Frank Herbert",
    "What is the largest planet?": "Saturn",
    "Which river flows through Cairo?": None,
}


def checkpoint(prompt: str) -> str:
    """Search for the question, read the first hit of the search, then answer (or break the format)."""
    question = next(q for q in ANSWERS if q in prompt)
    responses = prompt.count("<tool_response>")
    if responses == 0:
        call = {"name": "web_search", "arguments": {"query": [question]}}
        return f" I will search. </think>\n<tool_call>\n{json.dumps(call)}\n</tool_call>"
    if ANSWERS[question] is None:
        return " Let me read </think>\n<tool_call>\n{\"name\": \"browse_webpage\"\n"
    if responses == 1:
        url = re.search(r"'url': '([^']+)'", prompt.rsplit("<tool_response>", 1)[1]).group(1)
        call = {"name": "browse_webpage", "arguments": {"url_list": [url]}}
        return f" I will read the first page. </think>\n<tool_call>\n{json.dumps(call)}\n</tool_call>"
    return f" The page says so. </think>\n<answer>{ANSWERS[question]}</answer>"


def test_the_published_checkpoint_is_evaluated_with_the_original_protocol(qwen_tokenizer, qa_file, tiny_index,
                                                                           tokenizer_dir, tmp_path) -> None:
    out = tmp_path / "eval"
    with VLLMPolicyEmulator(qwen_tokenizer, checkpoint, model="GAIR/DeepResearcher-7b").running() as server:
        result = CliRunner().invoke(app, [
            "eval", "--policy", f"vllm:{server.base_url}", "--data", str(qa_file), "--out", str(out),
            "--set", "agent.protocol=deepresearcher", "--set", "agent.tokenizer=qwen2.5",
            "--set", f"search.index={tiny_index}", "--set", f"cache_dir={tokenizer_dir}", "--set", "cache.mode='off'",
        ])
    assert result.exit_code == 0, result.output
    requests = server.requests
    assert {r["temperature"] for r in requests} == {1.0}, "the original validated at temperature 1.0"
    assert {tuple(r.get("stop") or ()) for r in requests} == {()}, "every turn runs to its end-of-turn token"

    first = qwen_tokenizer.decode(requests[0]["prompt"], skip_special_tokens=False)
    today = dt.datetime.now(dt.timezone.utc).date()
    assert first.startswith("<|im_start|>system\n" + original.system_prompt(today) + "\n\n# Tools")
    assert all(json.dumps(tool) in first for tool in original.TOOLS)
    assert first.endswith("<|im_end|>\n<|im_start|>assistant\n<think>")

    records = {r["question"]: r for r in map(orjson.loads, (out / "trajectories.jsonl").read_bytes().splitlines())}
    paris = records["Which city is the capital of France?"]
    assert (paris["answer"], paris["termination"], paris["turns"], paris["f1"]) == ("Paris", "answer", 3, 1.0)
    search, browse = (turn["tool_call"] for turn in paris["trajectory"]["turns"][:2])
    assert search["text"].startswith("[{'search_query': 'Which city is the capital of France?', "
                                     "'web_page_info_list': [{'quick_summary': ")
    assert browse["text"].startswith("[{'information': [{'page_number': 0, 'page_summary': ")
    assert "Paris is the capital of France." in browse["text"]
    trained = paris["trajectory"]["segments"][0]["token_ids"]
    text = qwen_tokenizer.decode(trained, skip_special_tokens=False) + paris["trajectory"]["response_text"]
    last = [qwen_tokenizer.decode(r["prompt"], skip_special_tokens=False) for r in requests]
    last = [p for p in last if "capital of France" in p and p.count("<tool_response>") == 2]
    assert any(text.startswith(p) for p in last), "the last context the server got starts the episode's text"

    cairo = records["Which river flows through Cairo?"]
    assert (cairo["termination"], cairo["turns"], cairo["answer"]) == ("format_error", 2, None)
    metrics = orjson.loads((out / "metrics.json").read_bytes())
    assert (metrics["meta"]["protocol"], metrics["meta"]["temperature"], metrics["meta"]["context_budget"]) == (
        "deepresearcher", 1.0, 32768)
