"""Agents given as programs (``train.agent``, ``eval --agent``): each episode a process of its own against the policy
endpoint and the episode's tools, on real loopback servers, with the real world index and tools.

The example agents of ``examples/`` (the ``openai`` SDK with the tools over HTTP; the OpenAI Agents SDK with the tools
over MCP) run unchanged. A scripted policy (the only stand-in) gives the same replies to our own agent loop and to
each program, so what the trainer gets back can be compared token for token.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from deepresearcher.config import AgentProgramConfig, load_config
from deepresearcher.generate.scripted import ScriptedGenerator, key_by_text

pytest.importorskip("openai")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The tiny world's config and two of its test tasks with the scripted replies that research them."""
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    cache = tmp_path_factory.mktemp("cache")
    config = load_config(None, ["world.size=tiny", f"cache_dir={cache}", "eval.temperature=0.0",
                                "agent.max_turns=4", "browse.only_searched_urls=true"])
    tasks = [t for t in load_tasks(ensure_world(config), "test") if t.answerable and t.chain][:2]
    return config, tasks


def _replies(task) -> list[str]:
    hop = task.chain[0]
    call = lambda name, args: "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"
    return [
        f"Search first.</think>\n{call('web_search', {'query': [hop.query]})}",
        f"Read the page.</think>\n{call('browse_webpage', {'url_list': hop.evidence_urls[:1]})}",
        f"Found it.</think>\n<answer>{task.golds[0]}</answer>",
    ]


def _scripted(tokenizer, tasks) -> ScriptedGenerator:
    return ScriptedGenerator(tokenizer, {t.question: _replies(t) for t in tasks},
                             key_of=key_by_text(tokenizer, {t.question: t.question for t in tasks}))


def _program_tasks(config, tasks, toolbox):
    from deepresearcher.endpoint.programs import ProgramTask

    return [ProgramTask(t.id, t.question, toolbox, tuple(t.golds)) for t in tasks]


async def _run(config, tokenizer, tasks, program: str, *, timeout_s: float = 120.0, generator=None):
    from deepresearcher.agent.session import make_toolbox
    from deepresearcher.endpoint.programs import run_programs
    from deepresearcher.endpoint.server import endpoint_for
    from deepresearcher.web import make_environment

    generator = generator or _scripted(tokenizer, tasks)
    endpoint = endpoint_for(config, generator, tokenizer, model_name="policy", training=True)
    async with make_environment(config) as env:
        toolbox = make_toolbox(env, config)
        settings = AgentProgramConfig(program=program, timeout_s=timeout_s, max_concurrent=4)
        return await run_programs(settings, endpoint, _program_tasks(config, tasks, toolbox))


async def _our_loop(config, tokenizer, tasks):
    from deepresearcher.agent.session import open_session

    async with open_session(config, policy=(_scripted(tokenizer, tasks), tokenizer), decoding="train") as session:
        return await session.run([{"id": t.id, "question": t.question, "golds": t.golds} for t in tasks])


@pytest.mark.parametrize("example", ["openai_agent.py", "agents_sdk_agent.py"])
def test_an_example_agent_is_our_loop_token_for_token(world, qwen_tokenizer, example):
    """Given the same policy replies, an example agent's episodes are our own loop's: the same prompt, sampled and
    observed ids and loss mask (tools over HTTP, or over MCP through the Agents SDK), the same answer and reward."""
    if example == "agents_sdk_agent.py":
        pytest.importorskip("agents")
    from deepresearcher.train.rollout import score_trajectories

    config, tasks = world
    ours = asyncio.run(_our_loop(config, qwen_tokenizer, tasks))
    theirs = asyncio.run(_run(config, qwen_tokenizer, tasks, str(EXAMPLES / example)))
    for mine, program, task in zip(ours, theirs, tasks, strict=True):
        assert program.metadata["program"] == "answered", program.metadata
        assert program.answer == mine.answer == task.golds[0]
        assert program.metadata["segments"] == 1 and program.metadata["untrained_turns"] == 0
        assert qwen_tokenizer.decode(program.prompt_ids) == qwen_tokenizer.decode(mine.prompt_ids)
        assert program.completion_ids == mine.completion_ids
        assert program.completion_mask == mine.completion_mask
        observed = lambda t: [(turn.tool_call.name, turn.tool_call.text) for turn in t.turns if turn.tool_call]
        assert observed(program) == observed(mine) and len(observed(mine)) == 2
    task_dicts = [{"golds": t.golds, "question": t.question, "answerable": True} for t in tasks]
    assert [s["reward"] for s in score_trajectories(theirs, task_dicts, config)] == [1.0, 1.0]


PROGRAM = textwrap.dedent("""\
    import os, subprocess, sys, time
    question = sys.argv[-1]
    if "crash" in question:
        sys.exit("the agent crashed")
    if "hang" in question:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open(os.environ["PIDS"], "a").write(f"{os.getpid()} {child.pid}\\n")
        time.sleep(600)
    if "silent" in question:
        sys.exit(0)
    print("thinking aloud")
    print("  Vesk  ")
""")


def test_a_crashed_a_hung_and_a_silent_agent_end_one_episode_each(world, qwen_tokenizer, tmp_path, monkeypatch):
    """In one batch: a crash, a hang past the timeout (killed with the process it started), a program that printed
    nothing and one that answered each end their own episode; the batch returns all four, the first three without
    an answer (the format penalty), the last with its last line as the answer."""
    from deepresearcher.endpoint.programs import answer_view, program_failures
    from deepresearcher.reward import score_rollout

    config, _ = world
    script = tmp_path / "agent.py"
    script.write_text(PROGRAM)
    monkeypatch.setenv("PIDS", str(tmp_path / "pids"))
    questions = ["crash now", "hang forever", "silent please", "answer: where is Vesk?"]
    tasks = [SimpleNamespace(id=f"t{i}", question=q, golds=[]) for i, q in enumerate(questions)]
    trajectories = asyncio.run(_run(config, qwen_tokenizer, tasks, str(script), timeout_s=3.0,
                                    generator=ScriptedGenerator(qwen_tokenizer, [])))
    assert [t.metadata["program"] for t in trajectories] == ["crashed", "timeout", "no_answer", "answered"]
    assert "the agent crashed" in trajectories[0].metadata["program_stderr"]
    said = program_failures([t.metadata for t in trajectories])  # the line `eval --agent` prints for a person
    assert said is not None and said.startswith("3 of 4 runs of the agent program ended without an answer")
    assert "1 crashed, 1 timeout, 1 no_answer" in said and "stderr: exit code 1: the agent crashed." in said
    assert program_failures([t.metadata for t in trajectories[3:]]) is None
    assert [t.answer for t in trajectories] == [None, None, None, "Vesk"]
    assert all(t.prompt_ids and not t.completion_ids for t in trajectories)  # nothing sampled, nothing to train
    rewards = [score_rollout(answer_view(t), ["Vesk"]).reward for t in trajectories]
    assert rewards == [-1.0, -1.0, -1.0, 1.0]
    for pid in (tmp_path / "pids").read_text().split():  # the program and its child: gone, or dead and unreaped
        status = Path(f"/proc/{pid}/status")
        assert not status.exists() or "State:\tZ" in status.read_text()


def test_a_function_is_a_program(world, qwen_tokenizer, tmp_path, monkeypatch):
    """``module:function``: called with the question in a process of its own (a coroutine function awaited), with
    the episode's addresses in its environment; its return value is the answer."""
    config, tasks = world
    (tmp_path / "my_agent.py").write_text(textwrap.dedent("""\
        import os
        async def research(question):
            return os.environ["OPENAI_BASE_URL"].split("/episodes/")[1].split("-")[0] + " | " + question[:5]
    """))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    [trajectory] = asyncio.run(_run(config, qwen_tokenizer, tasks[:1], "my_agent:research",
                                    generator=ScriptedGenerator(qwen_tokenizer, [])))
    assert trajectory.answer == f"{tasks[0].id.split('-')[0]} | {tasks[0].question[:5]}"


def test_the_episode_tools_answer_as_the_agent_loop_does(world, qwen_tokenizer):
    """Over MCP and over HTTP, an episode's calls are answered with the observation text our loop shows, in the
    episode's own state: a page its search returned may be browsed, one it never saw is refused
    (``browse.only_searched_urls``), a bad call is an error result, and a call for an episode nobody opened is
    refused."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from deepresearcher.agent.session import make_toolbox
    from deepresearcher.agent.tools import ToolContext
    from deepresearcher.endpoint.app import create_app
    from deepresearcher.endpoint.server import LoopbackServer, endpoint_for
    from deepresearcher.endpoint.tools import ToolSessions, mount_episode_tools
    from deepresearcher.web import make_environment

    config, [task, other] = world
    hop, elsewhere = task.chain[0], other.chain[0].evidence_urls[0]

    async def main() -> None:
        async with make_environment(config) as env:
            toolbox = make_toolbox(env, config)
            expected_search = (await toolbox.call("web_search", {"query": [hop.query]}, ToolContext(question=task.question))).text
            sessions = ToolSessions()
            app = create_app(endpoint_for(config, ScriptedGenerator(qwen_tokenizer, []), qwen_tokenizer,
                                          model_name="policy", training=True))
            mount_episode_tools(app, sessions)
            async with LoopbackServer(app) as url, httpx2.AsyncClient(trust_env=False, timeout=60) as http:
                sessions.open("over-http", task.question, toolbox)
                sessions.open("over-mcp", task.question, toolbox)
                schemas = (await http.get(f"{url}/episodes/over-http/tools")).json()["tools"]
                assert [s["function"]["name"] for s in schemas] == ["web_search", "browse_webpage"]
                searched = (await http.post(f"{url}/episodes/over-http/tools/web_search",
                                            json={"query": [hop.query]})).json()
                assert searched == {"text": expected_search, "error": None}
                browsed = (await http.post(f"{url}/episodes/over-http/tools/browse_webpage",
                                           json={"url_list": hop.evidence_urls[:1]})).json()
                refused = (await http.post(f"{url}/episodes/over-http/tools/browse_webpage",
                                           json={"url_list": [elsewhere]})).json()
                assert browsed["error"] is None and hop.evidence_urls[0] in browsed["text"]
                assert "only URLs returned by web_search may be browsed" in refused["text"]
                missing = await http.post(f"{url}/episodes/nobody/tools/web_search", json={"query": ["x"]})
                assert missing.status_code == 404

                async with httpx2.AsyncClient(trust_env=False, timeout=60) as raw, \
                        streamable_http_client(f"{url}/episodes/over-mcp/mcp", http_client=raw) as (read, write), \
                        ClientSession(read, write) as mcp:
                    await mcp.initialize()
                    listed = await mcp.list_tools()
                    assert [t.name for t in listed.tools] == ["web_search", "browse_webpage"]
                    assert "question" not in listed.tools[1].input_schema["properties"]
                    result = await mcp.call_tool("web_search", {"query": [hop.query]})
                    assert (result.content[0].text, result.is_error) == (expected_search, False)
                    page = await mcp.call_tool("browse_webpage", {"url_list": hop.evidence_urls[:1]})
                    assert page.content[0].text == browsed["text"] and not page.is_error
                    denied = await mcp.call_tool("browse_webpage", {"url_list": [elsewhere]})
                    assert denied.content[0].text == refused["text"]
                    unknown = await mcp.call_tool("web_searches", {"query": ["x"]})
                    assert unknown.is_error

    asyncio.run(main())
