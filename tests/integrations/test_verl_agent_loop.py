"""Our agent loop inside verl's own agent-loop machinery, on the CPU.

verl's ``AgentLoopWorker`` (its worker, its per-sample padding and its batch post-processing, not a copy)
runs ``DeepResearcherAgentLoop`` on rows that verl's ``RLHFDataset`` read from the parquet our planner
wrote, against a scripted token server and the real local environment (tantivy index, extractive reader)
of a small synthetic world. The same scripts are also run through our own rollout engine: what verl
hands its trainer must be that trajectory, token for token, and the reward must be our scorer's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="the verl extra is not installed")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from deepresearcher.config import Config, load_config  # noqa: E402
from deepresearcher.generate.scripted import ScriptedGenerator, key_by_text  # noqa: E402
from deepresearcher.integrations.verl import plan  # noqa: E402
from deepresearcher.testing.verl_server import ScriptedTokenServer, scripted_logprob  # noqa: E402

RESPONSE_LENGTH = 2048


def call(name: str, arguments: dict[str, Any]) -> str:
    return f"Let me use a tool.</think>\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def run_config(small_world: Path, tmp_path: Path, extra: list[str] = ()) -> Config:
    """Our config for a 2-prompt, 1-GPU verl run on the small world (responses capped at RESPONSE_LENGTH)."""
    return load_config(overrides=[
        f"world.dir={small_world}", "world.size=small", f"cache_dir={tmp_path / 'cache'}",
        f"train.runs_dir={tmp_path / 'runs'}", "train.run_name=verl-test", "train.prompts_per_step=2",
        "train.group_size=2", "train.micro_batch_size=1", "train.verl.gpus_per_node=1", "train.verl.agent_workers=1",
        "train.verl.max_prompt_length=1024", f"agent.context_budget={1024 + RESPONSE_LENGTH}",
        "agent.max_tokens_per_turn=4096", *extra,
    ])


def prepared(config: Config, model: Path) -> tuple[Any, plan.RunFiles]:
    """The run files our planner writes and verl's composed config for them."""
    files = plan.RunFiles.of(config)
    plan.write_run_files(config, files)
    return plan.compose(plan.overrides(config, files, str(model)), config.train.verl.mode), files


def rows_batch(verl_config: Any, files: plan.RunFiles, tokenizer: Any, task_ids: list[str]) -> Any:
    """The rows of ``task_ids`` as verl's trainer batches them: RLHFDataset items, collated into a DataProto."""
    from verl import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    dataset = RLHFDataset(str(files.train_parquet), tokenizer, verl_config.data)
    by_id = {dataset.dataframe[i]["extra_info"]["index"]: i for i in range(len(dataset))}
    return DataProto.from_single_dict(collate_fn([dataset[by_id[t]] for t in task_ids]))


def scripts_for(tasks: dict[str, Any]) -> dict[str, list[str]]:
    """Per question: a researcher that searches, browses and answers; and one that rambles past the budget."""
    (good, long) = tasks.values()
    hop = good.chain[0]
    return {
        good.question: [call("web_search", {"query": [hop.query]}),
                        call("browse_webpage", {"url_list": hop.evidence_urls[:1]}),
                        f"The page says it.</think>\n<answer>{good.golds[0]}</answer>"],
        long.question: [call("web_search", {"query": [long.chain[0].query]}), "I keep thinking " * 3000],
    }


@pytest.fixture(scope="module")
def world_tasks(small_world: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two answerable one-hop train tasks that are GRPO prompts of the run (not held back for SFT)."""
    from deepresearcher.train.tasks import task_sets
    from deepresearcher.world import load_tasks

    config = run_config(small_world, tmp_path_factory.mktemp("probe"))
    grpo_ids = {t["id"] for t in task_sets(config).grpo}
    picked = [t for t in load_tasks(small_world, "train") if t.id in grpo_ids and t.answerable and len(t.chain) == 1]
    return {"good": picked[0], "long": picked[1]}


async def our_trajectories(config: Config, tokenizer: Any, tasks: dict[str, Any],
                           scripts: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The same scripts (default: ``scripts_for``) through our own engine, tools and template, with verl's
    episode budget."""
    from deepresearcher.agent.loop import RolloutEngine
    from deepresearcher.agent.tools import ToolBox
    from deepresearcher.generate.base import GenerationResult
    from deepresearcher.agent.session import make_template
    from deepresearcher.web import make_environment

    class LogprobGenerator(ScriptedGenerator):
        async def generate(self, prompt_ids, params):  # noqa: ANN001, ANN202
            result = await super().generate(prompt_ids, params)
            return GenerationResult(**{**result.model_dump(), "logprobs": [scripted_logprob(i) for i in range(len(result.token_ids))]})

    scripts = scripts or scripts_for(tasks)
    env = make_environment(config)
    template = make_template(tokenizer, config)
    out = {}
    try:
        for name, task in tasks.items():
            budget = len(template.prompt_ids(task.question)) + RESPONSE_LENGTH
            engine = RolloutEngine(LogprobGenerator(tokenizer, scripts[task.question]), ToolBox(env, config), template,
                                   config.agent.model_copy(update={"context_budget": budget}))
            out[name] = await engine.run({"id": task.id, "question": task.question, "golds": task.golds})
    finally:
        await env.aclose()
    return out


def assert_batch_holds(output: Any, ours: dict[str, Any], config: Config, verl_config: Any) -> None:
    """verl's padded batch (rows in task order) holds our trajectories: ids, loss mask, logprobs, reward."""
    from deepresearcher.train.rollout import score_trajectory

    prompt_width = verl_config.actor_rollout_ref.rollout.prompt_length
    for row, trajectory in enumerate(ours.values()):
        n = len(trajectory.completion_ids)
        prompt = output.batch["prompts"][row]
        assert prompt[prompt_width - len(trajectory.prompt_ids):].tolist() == trajectory.prompt_ids
        assert output.batch["responses"][row, :n].tolist() == trajectory.completion_ids
        assert output.batch["response_mask"][row, :n].tolist() == trajectory.completion_mask
        assert int(output.batch["response_mask"][row, n:].sum()) == 0  # padding is never trained on
        assert torch.allclose(output.batch["rollout_log_probs"][row, :n], torch.tensor(trajectory.completion_logprobs))
        reward = score_trajectory(trajectory, {"golds": trajectory.golds}, config)["reward"]
        rm_scores = output.batch["rm_scores"][row]
        assert rm_scores[n - 1].item() == pytest.approx(reward) and rm_scores.abs().sum().item() == pytest.approx(abs(reward))
        assert output.non_tensor_batch["termination"][row] == trajectory.termination


async def test_agent_loop_runs_in_verls_worker_and_hands_over_our_trajectory(
    small_world: Path, model_dir: Path, world_tasks: dict[str, Any], tmp_path: Path
) -> None:
    """Search, browse, answer inside verl's AgentLoopWorker: verl's padded batch holds our trajectory's ids,
    loss mask and logprobs, our scorer's reward at the last response token, and the over-long episode is
    marked truncated with the response exactly filling response_length."""
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from deepresearcher.integrations.verl.agent_loop import close_resources

    config = run_config(small_world, tmp_path)
    verl_config, files = prepared(config, model_dir)
    assert verl_config.actor_rollout_ref.rollout.response_length == RESPONSE_LENGTH
    scripts = scripts_for(world_tasks)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    server = ScriptedTokenServer(ScriptedGenerator(tokenizer, scripts, key_of=key_by_text(tokenizer, {q: q for q in scripts})),
                                 global_steps=5)
    worker = AgentLoopWorker(verl_config, llm_client=server)  # loads its own tokenizer from the model directory
    batch = rows_batch(verl_config, files, worker.tokenizer, [t.id for t in world_tasks.values()])
    try:
        output = await worker.generate_sequences(batch)
    finally:
        await close_resources()
    server.generator.assert_consumed()

    ours = await our_trajectories(config, tokenizer, world_tasks)
    assert_batch_holds(output, ours, config, verl_config)

    good, long = ours["good"], ours["long"]
    assert [t.tool_call.name for t in good.turns if t.tool_call] == ["web_search", "browse_webpage"]
    assert not any(t.tool_call.error for t in good.turns if t.tool_call)
    assert good.termination == "answer" and good.answer == world_tasks["good"].golds[0]
    assert output.batch["rm_scores"][0].sum().item() == 1.0
    assert list(output.non_tensor_batch["searches"]) == [1, 1] and list(output.non_tensor_batch["browses"]) == [1, 0]
    assert list(output.non_tensor_batch["truncated"]) == [False, True]
    assert long.termination == "context_budget" and len(long.completion_ids) == RESPONSE_LENGTH
    assert output.batch["rm_scores"][1].sum().item() == config.reward.format_penalty
    assert list(output.non_tensor_batch["__num_turns__"]) == [6, 4]
    assert all(r["stop"] == ["</tool_call>", "</answer>"] and r["logprobs"] for r in server.requests)
    assert len({r["request_id"] for r in server.requests}) == 2  # one sticky request id per episode
    assert isinstance(output.non_tensor_batch["termination"], np.ndarray)
    # the weights versions verl's server reported, passed through: verl's v1 trainer makes int arrays of them
    for key in ("min_global_steps", "max_global_steps"):
        assert np.array(output.non_tensor_batch[key], dtype=int).tolist() == [5, 5]


async def test_the_stand_in_server_answers_verls_own_agent_loop(
    small_world: Path, model_dir: Path, world_tasks: dict[str, Any], tmp_path: Path
) -> None:
    """verl's ``single_turn_agent`` calls the server without ``max_tokens`` and passes its ``extra_fields``
    on: the stand-in must take that call as verl's server does and give what verl's client gives."""
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    config = run_config(small_world, tmp_path)
    verl_config, files = prepared(config, model_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    replies = {t.question: [f"<answer>{t.golds[0]}</answer>"] for t in world_tasks.values()}
    rollout = verl_config.actor_rollout_ref.rollout
    server = ScriptedTokenServer(ScriptedGenerator(tokenizer, replies, key_of=key_by_text(tokenizer, {q: q for q in replies})),
                                 prompt_length=rollout.prompt_length, response_length=rollout.response_length, global_steps=2)
    worker = AgentLoopWorker(verl_config, llm_client=server)
    batch = rows_batch(verl_config, files, worker.tokenizer, [t.id for t in world_tasks.values()])
    batch.non_tensor_batch["agent_name"] = np.array(["single_turn_agent"] * len(batch), dtype=object)
    output = await worker.generate_sequences(batch)
    server.generator.assert_consumed()
    assert all("max_tokens" not in r for r in server.requests)
    for row, task in enumerate(world_tasks.values()):
        expected = tokenizer(f"<answer>{task.golds[0]}</answer>", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        assert output.batch["responses"][row, :len(expected)].tolist() == expected
    assert np.array(output.non_tensor_batch["max_global_steps"], dtype=int).tolist() == [2, 2]


@pytest.mark.slow
def test_agent_loop_runs_across_a_two_node_ray_cluster(
    small_world: Path, model_dir: Path, world_tasks: dict[str, Any], tmp_path: Path
) -> None:
    """verl's AgentLoopManager on a local Ray cluster of two nodes: one AgentLoopWorker process per node,
    each running our loop on its chunk of the batch; the gathered batch is the same as in one process."""
    import asyncio

    import ray
    from ray.cluster_utils import Cluster
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopManager

    from deepresearcher.integrations.verl import agent_loop

    config = run_config(small_world, tmp_path, ["train.verl.agent_workers=2"])
    verl_config, files = prepared(config, model_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    scripts = scripts_for(world_tasks)
    server = ScriptedTokenServer(ScriptedGenerator(tokenizer, scripts, key_of=key_by_text(tokenizer, {q: q for q in scripts})))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address)
        manager = AgentLoopManager.create(config=verl_config, llm_client=server)
        output = manager.generate_sequences(rows_batch(verl_config, files, tokenizer, [t.id for t in world_tasks.values()]))
        def facts(worker: Any) -> tuple[str, int, int]:  # runs in the actor: node, process, resource sets built
            from deepresearcher.integrations.verl import agent_loop as loop_module

            return ray.get_runtime_context().get_node_id(), os.getpid(), len(loop_module._RESOURCES)

        where = ray.get([worker.__ray_call__.remote(facts) for worker in manager.agent_loop_workers])
        assert len({node for node, _, _ in where}) == 2, "one agent-loop worker on each node"
        assert len({pid for _, pid, _ in where} | {os.getpid()}) == 3, "each worker is its own process"
        assert [built for _, _, built in where] == [1, 1], "each worker built its environment and template once"
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert not agent_loop._RESOURCES, "the episodes ran in the workers, not in this process"
    ours = asyncio.run(our_trajectories(config, tokenizer, world_tasks))
    assert_batch_holds(output, ours, config, verl_config)
    assert list(output.non_tensor_batch["truncated"]) == [False, True]
