"""`deepresearcher research`: the live trace of a scripted episode, and the embedded model end to end offline."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from deepresearcher.agent.loop import run_rollouts
from deepresearcher.agent.tools import ToolBox
from deepresearcher.cli.research_cmd import TraceDisplay
from deepresearcher.config import load_config
from deepresearcher.generate.scripted import ScriptedGenerator
from deepresearcher.web.environment import WebEnvironment

DOCUMENTED_ENDS = {"answer", "max_turns", "context_budget", "format_error"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    config = load_config(None, ["world.size=tiny", f"cache_dir={tmp_path_factory.mktemp('cache')}"])
    world_dir = ensure_world(config)
    task = next(t for t in load_tasks(world_dir, "test") if t.answerable and len(t.chain) == 1)
    return world_dir, config, task


async def test_trace_shows_thoughts_searches_pages_notes_and_answer(world, qwen_tokenizer):
    """The live display prints each step of a real-tools episode and the answer with the page that supports it."""
    _, config, task = world
    hop, gold = task.chain[0], task.golds[0]
    tool = lambda name, args: json.dumps({"name": name, "arguments": args})
    replies = [
        f"I will look up {hop.subject}.</think>\n<tool_call>{tool('web_search', {'query': [hop.query]})}</tool_call>",
        f"Open the page.</think>\n<tool_call>{tool('browse_webpage', {'url_list': hop.evidence_urls[:1]})}</tool_call>",
        f"The page says {gold}.</think>\n<answer>{gold}</answer>",
    ]
    console = Console(record=True, width=200)
    async with WebEnvironment.from_config(config) as env:
        generator = ScriptedGenerator(qwen_tokenizer, replies)
        [trajectory] = await run_rollouts([task], generator, ToolBox(env, config), qwen_tokenizer, config.agent,
                                          on_event=TraceDisplay(console))
    generator.assert_consumed()
    text = console.export_text()
    for expected in (f"I will look up {hop.subject}", f"search {hop.query}", f"open {hop.evidence_urls[0]}",
                     f"notes from {hop.evidence_urls[0]}", "Turn 3", "Answer", f"✓ {hop.evidence_urls[0]}",
                     "ended: answer"):
        assert expected in text, expected
    assert text.index("Turn 1") < text.index("notes from") < text.index("Answer")
    assert trajectory.answer == gold


async def test_trace_reads_the_original_protocols_observations(world, qwen_tokenizer):
    """Under agent.protocol=deepresearcher the trace shows the original's observations: hits, then page parts."""
    from deepresearcher.agent.protocols import get_protocol
    from deepresearcher.agent.template import ChatTemplate

    _, config, task = world
    config = load_config(None, ["world.size=tiny", f"cache_dir={config.cache_dir}", "agent.protocol=deepresearcher"])
    protocol, hop = get_protocol("deepresearcher"), task.chain[0]
    tool = lambda name, args: json.dumps({"name": name, "arguments": args})
    console = Console(record=True, width=200)
    async with WebEnvironment.from_config(config) as env:
        url = (await env.search([hop.query]))[0].hits[0].url
        generator = ScriptedGenerator(qwen_tokenizer, [
            f" Search.</think>\n<tool_call>\n{tool('web_search', {'query': [hop.query]})}\n</tool_call>",
            f" Read.</think>\n<tool_call>\n{tool('browse_webpage', {'url_list': [url]})}\n</tool_call>",
            " Done.</think>\n<answer>x</answer>",
        ])
        [trajectory] = await run_rollouts([task], generator, protocol.make_toolbox(env, config), qwen_tokenizer,
                                          config.agent, on_event=TraceDisplay(console),
                                          template=ChatTemplate(qwen_tokenizer, protocol))
    generator.assert_consumed()
    text = console.export_text()
    notes = trajectory.turns[1].tool_call.observation[0]["information"][0]["page_summary"]
    for expected in (f"search {hop.query}", f"open {url}", f"notes from {url}", notes[:40], "ended: answer"):
        assert expected in text, expected


def test_research_with_the_embedded_model_offline(world, request, tmp_path):
    """The default policy (embedded SmolLM2) runs a whole episode offline, prints a trace, saves a token-exact trajectory.

    The dequantized weights are kept in pytest's cache, so only the first run pays for the GGUF conversion.
    """
    from deepresearcher.agent.trajectory import load_trajectories
    from deepresearcher.cli.main import app

    world_dir, _, task = world
    pytest_cache = getattr(request.config, "cache", None)  # None under `-p no:cacheprovider`
    cache = pytest_cache.mkdir("deepresearcher-embedded") if pytest_cache is not None else tmp_path / "cache"
    saved = tmp_path / "trajectories.jsonl"
    args = ["research", task.question, "--set", f"world.dir={world_dir}", "--set", f"cache_dir={cache}",
            "--max-turns", "2", "--max-tokens", "12", "--temperature", "0", "--save", str(saved)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Question" in result.stdout and "Turn 1" in result.stdout and "Answer" in result.stdout
    [trajectory] = load_trajectories(saved)
    assert trajectory.termination in DOCUMENTED_ENDS and trajectory.turns
    assert f"ended: {trajectory.termination}" in result.stdout
    policy = [s for s in trajectory.segments if s.source == "policy"]
    assert policy and all(len(s.token_ids) == len(s.logprobs) <= 12 for s in policy)
    assert trajectory.metadata["exact_tokens"] is True


def test_research_on_a_fresh_install_searches_before_it_answers(request, tmp_path, monkeypatch):
    """The README's usage line as a new user runs it: no quickstart run, no --policy or --config, the default world.
    The embedded SmolLM2 (guided, `agent.guide: auto`) searches first, opens a page the search returned, and
    answers with text that page holds, not the prompt's placeholders."""
    from deepresearcher.agent.trajectory import Trajectory
    from deepresearcher.cli.main import app
    from deepresearcher.eval.behaviours import observed_text
    from deepresearcher.reward import cover_em

    pytest_cache = getattr(request.config, "cache", None)
    cache = pytest_cache.mkdir("deepresearcher-embedded") if pytest_cache is not None else tmp_path / "cache"
    monkeypatch.chdir(tmp_path)  # no runs/quickstart here: a fresh install
    question = "In which city was Pedres Broutrein born?"
    result = CliRunner().invoke(app, ["research", question, "--json", "--set", f"cache_dir={cache}"])
    assert result.exit_code == 0, result.output
    assert "embedded SmolLM2-135M-Instruct, guided" in result.stderr
    trajectory = Trajectory.model_validate_json(result.stdout)
    calls = [turn.tool_call for turn in trajectory.turns if turn.tool_call is not None]
    assert trajectory.termination == "answer" and calls, [turn.text for turn in trajectory.turns]
    assert calls[0].name == "web_search" and calls[0].error is None and calls[0].observation
    found = {hit["url"] for entry in calls[0].observation for hit in entry["web_page_info_list"]}
    read = [call for call in calls if call.name == "browse_webpage" and call.error is None]
    assert read and set(read[0].arguments["url_list"]) <= found
    assert trajectory.answer and "YOUR" not in trajectory.answer
    assert cover_em(observed_text(trajectory), [trajectory.answer]), (trajectory.answer, "is not in what it read")
