"""An episode in flight when verl pushes new weights: resumed from its tokens, or dropped, never half-scored.

verl's asynchronous trainers sync weights while episodes run: ``CheckpointEngineManager.update_weights``
aborts every request in flight on the rollout servers, loads the weights and resumes them. What becomes of
the aborted turn is verl's rule, in its ``FullyAsyncLLMServerClient``: with ``async_training.partial_rollout``
it asks again with the turn's prompt plus the tokens it had and merges the two parts; without, it hands the
aborted turn back, and the episode must be dropped.

Real here: verl's ``AgentLoopWorker`` running our loop on rows of verl's ``RLHFDataset``, verl's
``FullyAsyncLLMServerClient`` (the resume rule itself) and its ``GlobalRequestLoadBalancer``, verl's config
for ``fully_async`` composed by our planner, our tools on the small world's local environment. Standing in:
the vLLM server (``WeightSyncTokenServer``: scripted replies streamed token by token, aborted and resumed as
vLLM is around a sync) and Ray's actor handles around the balancer and the server (``LocalActor``: the same
``.remote()`` calls, in this process).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="the verl extra is not installed")

from test_verl_agent_loop import (  # noqa: E402  (helpers of the sync agent-loop tests, same directory)
    assert_batch_holds, our_trajectories, prepared, rows_batch, run_config, scripts_for, world_tasks)

from deepresearcher.testing.verl_server import LocalActor, WeightSyncTokenServer  # noqa: E402

__all__ = ["world_tasks"]  # the module-scoped fixture, shared
HELD_AFTER = 5  # tokens of the held turn sampled before the sync


async def run_through_a_weight_sync(config: Any, model_dir: Path, tasks: dict[str, Any], scripts: dict[str, list[str]]
                                    ) -> tuple[Any, Any, WeightSyncTokenServer]:
    """verl's worker runs the episodes; when the good episode's second turn has sampled HELD_AFTER tokens, the
    weights are synced as verl's trainer does it (abort all, version 0 → 1, resume)."""
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.workers.rollout.llm_server import FullyAsyncLLMServerClient
    from verl.workers.rollout.router import GlobalRequestLoadBalancer

    from deepresearcher.integrations.verl.agent_loop import close_resources

    verl_config, files = prepared(config, model_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    server = WeightSyncTokenServer(tokenizer, {q: [replies] for q, replies in scripts.items()})
    server.hold(tasks["good"].question, turn=1, after=HELD_AFTER)
    balancer = GlobalRequestLoadBalancer({"replica-0": LocalActor(server)})
    client = FullyAsyncLLMServerClient(config=verl_config, load_balancer_handle=LocalActor(balancer))
    worker = AgentLoopWorker(verl_config, llm_client=client)

    async def sync_weights() -> None:
        await server.held.wait()
        await server.abort_all_requests()
        server.set_global_steps(1)
        await server.resume_generation()

    syncing = asyncio.create_task(sync_weights())
    try:
        output = await worker.generate_sequences(rows_batch(verl_config, files, worker.tokenizer,
                                                            [t.id for t in tasks.values()]))
    finally:
        syncing.cancel()
        await close_resources()
    assert server.held.is_set(), "the sync landed in the middle of a turn"
    return output, verl_config, server


async def test_partial_rollout_resumes_the_aborted_turn_and_the_episode_is_whole(
        small_world: Path, model_dir: Path, world_tasks: dict[str, Any], tmp_path: Path) -> None:
    """partial_rollout: every aborted turn goes on from its own tokens after the sync, so verl's batch holds,
    token for token, the episodes our engine makes without any sync, with our scorer's reward; the held
    episode records that it was sampled by weights versions 0 and 1."""
    config = run_config(small_world, tmp_path, ["train.verl.mode=fully_async", "train.verl.partial_rollout=true"])
    output, verl_config, server = await run_through_a_weight_sync(config, model_dir, world_tasks, scripts_for(world_tasks))
    assert verl_config.async_training.partial_rollout is True

    good = world_tasks["good"].question
    assert good in server.aborted
    held, resumed = [r for r in server.requests if r["question"] == good][1:3]
    assert resumed["prompt_ids"] == held["prompt_ids"] + resumed["prompt_ids"][len(held["prompt_ids"]):]
    assert len(resumed["prompt_ids"]) - len(held["prompt_ids"]) == HELD_AFTER
    assert resumed["max_tokens"] == held["max_tokens"] - HELD_AFTER

    tokenizer = server.tokenizer
    ours = await our_trajectories(config, tokenizer, world_tasks)
    assert_batch_holds(output, ours, config, verl_config)
    assert output.batch["rm_scores"][0].sum().item() == 1.0, "the resumed episode is scored whole: right answer"
    assert list(output.non_tensor_batch["min_global_steps"]) == [0, 0]
    assert list(output.non_tensor_batch["max_global_steps"]) == [1, 1]
    assert list(output.non_tensor_batch["dropped"]) == [0.0, 0.0]


async def test_without_partial_rollout_the_aborted_episode_is_dropped_never_scored(
        small_world: Path, model_dir: Path, world_tasks: dict[str, Any], tmp_path: Path) -> None:
    """No partial_rollout: verl hands the aborted turn back; the episode is dropped as verl marks an aborted
    sample (empty response, nothing trained, reward 0: the scorer never sees the half episode, whose search
    was good), and is never resumed; the episode that had finished before the sync is scored as usual."""
    config = run_config(small_world, tmp_path, ["train.verl.mode=fully_async", "train.verl.partial_rollout=false"])
    good, other = world_tasks["good"], world_tasks["long"]
    scripts = {**{k: v for k, v in scripts_for(world_tasks).items() if k == good.question},
               other.question: [f"I know it.</think>\n<answer>{other.golds[0]}</answer>"]}
    output, verl_config, server = await run_through_a_weight_sync(config, model_dir, world_tasks, scripts)
    assert verl_config.async_training.partial_rollout is False

    assert server.aborted == [good.question], "only the held turn was in flight"
    assert len([r for r in server.requests if r["question"] == good.question]) == 2, "never resumed"
    assert output.batch["response_mask"][0].sum().item() == 0 and output.batch["attention_mask"][0, -1].item() == 0
    assert output.batch["rm_scores"][0].abs().sum().item() == 0.0
    assert output.non_tensor_batch["termination"][0] == "aborted"
    assert list(output.non_tensor_batch["dropped"]) == [1.0, 0.0]
    assert output.non_tensor_batch["searches"][0] == 0.0, "nothing of the half episode is reported"

    tokenizer = server.tokenizer
    ours = await our_trajectories(config, tokenizer, {"long": other}, scripts)
    n = len(ours["long"].completion_ids)
    assert output.batch["responses"][1, :n].tolist() == ours["long"].completion_ids
    assert output.batch["rm_scores"][1].sum().item() == 1.0
