"""One session for every command: the same policy replies give the same tokens, masks and scores in
``research``, ``eval`` and a GRPO step.

The config trains with the one-line system turn (``train.compact_prompt``), the setting under which
``research`` and ``eval`` once built another prompt than training did, so a trained model met a system
turn it had never seen. The scripted policy is the only stand-in: tools, world, template and scorers are real.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import orjson
import pytest

from deepresearcher.agent.session import COMPACT_SYSTEM_PROMPT
from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import load_config
from deepresearcher.generate.scripted import ScriptedGenerator


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from deepresearcher.eval.runner import load_eval_tasks

    cache = tmp_path_factory.mktemp("cache")
    config = load_config(None, [
        "world.size=tiny", f"cache_dir={cache}", "train.compact_prompt=true", "eval.benchmarks=[world]",
        "eval.limit=1", "agent.temperature=1.0", "eval.temperature=0.0",
    ])
    [task] = load_eval_tasks(config)["world"]
    return config, task


def _replies(config, task) -> list[str]:
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    world_task = next(t for t in load_tasks(ensure_world(config), "test") if t.id == task.id)
    hop = world_task.chain[0]
    call = lambda name, args: "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"
    return [
        f"Search first.</think>\n{call('web_search', {'query': [hop.query]})}",
        f"Read the page.</think>\n{call('browse_webpage', {'url_list': hop.evidence_urls[:1]})}",
        f"Found it.</think>\n<answer>{task.golds[0]}</answer>",
    ]


def test_research_eval_and_a_grpo_step_see_the_same_episode(setup, qwen_tokenizer, tmp_path, monkeypatch):
    from deepresearcher.cli.research_cmd import run_research
    from deepresearcher.eval.runner import run_eval
    from deepresearcher.train.grpo import GRPORollouts
    from deepresearcher.train.rollout import Rollouts, score_trajectories, score_trajectory
    from deepresearcher.train.run_dir import RunDir

    config, task = setup
    replies = _replies(config, task)
    scripted = lambda: ScriptedGenerator(qwen_tokenizer, replies)

    researched = asyncio.run(run_research(task.question, config, policy=(scripted(), qwen_tokenizer)))

    run_eval(config, tmp_path / "eval", policy=(scripted(), qwen_tokenizer))
    [record] = [orjson.loads(line) for line in (tmp_path / "eval" / "trajectories.jsonl").read_bytes().splitlines()]
    evaluated = Trajectory.model_validate(record["trajectory"])

    # A GRPO step: TRL's rollout_func on our collector; the trainer's model is replaced by the script.
    import deepresearcher.generate.factory as factory

    monkeypatch.setattr(factory, "make_policy", lambda cfg, **kw: (scripted(), kw["tokenizer"]))
    world_task = {"id": task.id, "question": task.question, "golds": task.golds, "answerable": True}
    rollouts = Rollouts(config, seed=0)
    try:
        grpo = GRPORollouts({task.id: world_task}, rollouts.collect, lambda ts, ks: score_trajectories(ts, ks, config),
                            RunDir(tmp_path / "run"), config.train, qwen_tokenizer)
        model = SimpleNamespace(training=False, eval=lambda: None, train=lambda mode=True: None)
        trainer = SimpleNamespace(state=SimpleNamespace(global_step=0), use_vllm=False, model=model,
                                  accelerator=SimpleNamespace(unwrap_model=lambda m: m))
        step = grpo([task.id], trainer)
    finally:
        rollouts.close()

    system_turn = qwen_tokenizer.decode(researched.prompt_ids)
    assert COMPACT_SYSTEM_PROMPT in system_turn, "research must use the system turn the model was trained with"
    assert researched.termination == evaluated.termination == "answer"
    assert researched.all_ids == evaluated.all_ids == step["prompt_ids"][0] + step["completion_ids"][0]
    assert researched.completion_mask == evaluated.completion_mask == step["env_mask"][0]
    trained = score_trajectory(researched, world_task, config)
    assert record["format_ok"] and trained["format_error"] == 0.0
    assert record["reward"] == trained["reward"] == step["reward"][0] == pytest.approx(1.0)
    assert record["f1"] == trained["f1"] == 1.0


def test_only_the_session_reads_agent_protocol():
    """``agent.protocol`` is resolved in ``agent.session`` alone (template, toolbox, plans use its helpers),
    so a protocol cannot be one thing in the template and another in the tools."""
    import ast
    from pathlib import Path

    import deepresearcher
    from deepresearcher.agent.protocols.deepresearcher_tools import DeepResearcherToolBox
    from deepresearcher.agent.session import make_toolbox
    from deepresearcher.agent.tools import ToolBox

    package = Path(deepresearcher.__file__).parent
    callers = sorted(
        str(path.relative_to(package)) for path in package.rglob("*.py")
        if any(isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "get_protocol"
               and not all(isinstance(arg, ast.Constant) for arg in node.args)  # NATIVE = get_protocol("native")
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))
    )
    assert callers == ["agent/session.py"]
    env = SimpleNamespace()
    for protocol, toolbox in (("native", ToolBox), ("deepresearcher", DeepResearcherToolBox)):
        config = load_config(None, [f"agent.protocol={protocol}"])
        assert type(make_toolbox(env, config)) is toolbox
