"""Rollout engine benchmark: throughput against a lock-step baseline, and the engine's own overhead.

Workload: ``--rollouts`` episodes of ``--turns`` tool calls then an answer, with a scripted policy that
answers instantly (tokenized replies, no model) and tools whose latency is lognormal (median
``--median-ms``, shape ``--sigma``: most calls are quick, a few are very slow, as live search is). The
same seeded latencies drive both runs:

* ``engine``: ``run_rollouts`` — each rollout advances on its own;
* ``lockstep``: every turn, all rollouts generate, then all tool calls run and the turn ends when the
  slowest returns (how batched rollout loops without per-trajectory state work).

Overhead (``instant_tools``): tools answer at once and each generation takes ``--gen-ms`` (a server
that batches freely; 1 s is short for a policy turn of hundreds of tokens on a GPU server); the ideal
wall time is ``(turns + 1) * gen-ms``, and everything above it is the engine's own work (templates,
tokenizing observations, parsing, bookkeeping) on the one event loop. ``engine_us_per_turn`` is that
work per turn with an instant generator too, so the fraction for another turn time can be worked out.

    deepresearcher bench rollout --json
    deepresearcher bench rollout --rollouts 256 --sigma 1.5

Targets (issue 5): ``speedup`` >= 2 and ``overhead_fraction`` < 0.05.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from typing import Any

from deepresearcher.agent.loop import RolloutTask, run_rollouts
from deepresearcher.agent.parsing import parse_turn
from deepresearcher.agent.template import ChatTemplate
from deepresearcher.agent.tools import TOOL_SCHEMAS, ToolContext
from deepresearcher.config import AgentConfig, Config
from deepresearcher.generate.base import SamplingParams
from deepresearcher.inference.embedded import load_qwen25_tokenizer
from deepresearcher.generate.scripted import ScriptedGenerator


class _Outcome:
    """A tool observation (the ToolOutcome shape), without error or raw result."""

    def __init__(self, text: str) -> None:
        self.text, self.error, self.raw = text, None, None


class LatencyToolBox:
    """Answers every call after the latency planned for (question, call number); a short fixed observation."""

    def __init__(self, latencies: dict[str, list[float]]) -> None:
        self.latencies = latencies

    async def call(self, name: str, arguments: dict, context: ToolContext) -> _Outcome:
        step = len(context.queries)
        context.queries.append(name)
        delay = self.latencies[context.question][step]
        if delay:
            await asyncio.sleep(delay)
        return _Outcome(text='[{"search_query": "q", "web_page_info_list": [{"title": "t", "url": "https://x.org/a"}]}]')


def _workload(n: int, turns: int, median_ms: float, sigma: float, seed: int) -> tuple[dict, dict]:
    rng = random.Random(seed)
    call = '<tool_call>\n{"name": "web_search", "arguments": {"query": ["freedonia capital"]}}\n</tool_call>'
    reply = "I should search.</think>\n" + call
    questions = {f"q{i}": f"Question number {i}: what is the capital of Freedonia?" for i in range(n)}
    scripts = {k: [reply] * turns + ["found</think>\n<answer>Fredville</answer>"] for k in questions}
    latencies = {q: [rng.lognormvariate(0.0, sigma) * median_ms / 1000 for _ in range(turns)] for q in questions.values()}
    return questions, scripts, latencies  # type: ignore[return-value]


def _generator(template: ChatTemplate, questions: dict, scripts: dict, latency: float = 0.0) -> ScriptedGenerator:
    """Scripts keyed by each rollout's prompt ids (a dict lookup, so the harness costs the engine nothing)."""
    prompts = {tuple(template.prompt_ids(q)): k for k, q in questions.items()}
    width = {len(p) for p in prompts}

    def key_of(ids: list[int]) -> str:
        return next(prompts[tuple(ids[:n])] for n in width if tuple(ids[:n]) in prompts)

    return ScriptedGenerator(template.tokenizer, scripts, key_of=key_of, latency=latency)


async def _engine(tokenizer, template, questions, scripts, latencies, cfg, gen_latency=0.0) -> float:
    generator = _generator(template, questions, scripts, gen_latency)
    tasks = [RolloutTask(task_id=k, question=q) for k, q in questions.items()]
    start = time.perf_counter()
    trajectories = await run_rollouts(tasks, generator, LatencyToolBox(latencies), tokenizer, cfg, template=template)
    wall = time.perf_counter() - start
    generator.assert_consumed()
    assert all(t.termination == "answer" for t in trajectories)
    return wall


async def _lockstep(tokenizer, template, questions, scripts, latencies, cfg) -> float:
    """All rollouts generate, then all tools run; each turn waits for the slowest tool call."""
    generator = _generator(template, questions, scripts)
    toolbox = LatencyToolBox(latencies)
    params = SamplingParams(max_tokens=cfg.max_tokens_per_turn, stop=["</tool_call>", "</answer>"])
    active = {k: (template.prompt_ids(q), ToolContext(question=q)) for k, q in questions.items()}
    start = time.perf_counter()
    while active:
        keys = list(active)
        results = await asyncio.gather(*(generator.generate(active[k][0], params) for k in keys))
        calls = []
        for key, result in zip(keys, results):
            ids, context = active[key]
            parsed = parse_turn(tokenizer.decode(result.token_ids), TOOL_SCHEMAS)
            if parsed.answer is not None:
                del active[key]
                continue
            ids.extend(result.token_ids)
            calls.append((key, toolbox.call(parsed.tool_name, parsed.arguments, context)))
        outcomes = await asyncio.gather(*(c for _, c in calls))
        for (key, _), outcome in zip(calls, outcomes):
            ids, _ = active[key]
            ids.extend(template.encode(template.observation_text(outcome.text, ids[-1:])))
    wall = time.perf_counter() - start
    generator.assert_consumed()
    return wall


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="deepresearcher bench rollout")
    parser.add_argument("--rollouts", type=int, default=64)
    parser.add_argument("--turns", type=int, default=4, help="Tool calls per episode before the answer.")
    parser.add_argument("--median-ms", type=float, default=50.0, help="Median tool latency.")
    parser.add_argument("--sigma", type=float, default=1.0, help="Lognormal shape of tool latency.")
    parser.add_argument("--gen-ms", type=float, default=1000.0, help="Generation time per turn in the overhead run.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    tokenizer = load_qwen25_tokenizer(Config().resolved_cache_dir())
    template = ChatTemplate(tokenizer)
    cfg = AgentConfig(max_turns=args.turns + 1, max_concurrent_generations=10_000, max_concurrent_tools=10_000)
    workload = _workload(args.rollouts, args.turns, args.median_ms, args.sigma, args.seed)
    latencies = workload[2]
    instant = {q: [0.0] * args.turns for q in latencies}

    async def measure() -> dict[str, float]:
        await _engine(tokenizer, template, *workload[:2], instant, cfg)  # warm caches (tokenizer, regexes)
        return {
            "engine": await _engine(tokenizer, template, *workload, cfg),
            "lockstep": await _lockstep(tokenizer, template, *workload, cfg),
            "instant_all": await _engine(tokenizer, template, *workload[:2], instant, cfg),
            "instant_tools": await _engine(tokenizer, template, *workload[:2], instant, cfg, args.gen_ms / 1000),
        }

    walls = asyncio.run(measure())
    n_turns = args.rollouts * (args.turns + 1)
    ideal = (args.turns + 1) * args.gen_ms / 1000
    slowest_tools = max(sum(v) for v in latencies.values())
    return {
        "benchmark": "rollout",
        "params": vars(args),
        "engine_rollouts_per_s": round(args.rollouts / walls["engine"], 2),
        "lockstep_rollouts_per_s": round(args.rollouts / walls["lockstep"], 2),
        "speedup": round(walls["lockstep"] / walls["engine"], 2),
        "engine_wall_s": round(walls["engine"], 4),
        "lockstep_wall_s": round(walls["lockstep"], 4),
        "slowest_rollout_tool_s": round(slowest_tools, 4),
        "engine_us_per_turn": round(walls["instant_all"] / n_turns * 1e6, 1),
        "instant_tools_wall_s": round(walls["instant_tools"], 4),
        "instant_tools_ideal_s": round(ideal, 4),
        "overhead_fraction": round(max(0.0, walls["instant_tools"] - ideal) / walls["instant_tools"], 4),
        "targets": {"speedup_min": 2.0, "overhead_fraction_max": 0.05},
    }


if __name__ == "__main__":
    print(json.dumps(main(__import__("sys").argv[1:]), indent=2))
