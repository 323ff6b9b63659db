"""``launch.run`` in verl's asynchronous modes: verl's own asynchronous machinery on the CPU, with our loop.

fully_async: ``launch.run`` → verl's ``fully_async_main.main`` → ``FullyAsyncTaskRunner`` →
``FullyAsyncRollouter`` (its dataloader feeding one prompt group at a time to ``FullyAsyncAgentLoopManager``
→ ``AgentLoopWorker`` → our agent loop, tools and local environment → verl's ``MessageQueue``) and
``FullyAsyncTrainer`` (taking samples from the queue, GRPO advantages on the sampling log-probs (bypass
mode), update, weight sync every ``trigger_parameter_sync_step`` updates, ``reset_staleness`` on the
rollouter), the rollouter running one prompt group ahead (``staleness_threshold=1``). A turn of the second
group is held until the first weight sync, which aborts it; verl's ``FullyAsyncLLMServerClient`` resumes
it under the new weights (``partial_rollout``).

one_step_off: ``launch.run`` → verl's ``one_step_off_policy.main_ppo.main`` → ``OneStepTaskRunner`` →
``OneStepOffRayTrainer.fit``: the next batch is generated while the current one trains, the weights are
synced in between.

Both: two steps of one prompt x two rollouts on the small world. Standing in
(``deepresearcher.testing.verl_async``, see its docstring), for what needs a GPU only: the vLLM rollout
servers (a scripted Ray actor behind verl's real load balancer and client, aborted and resumed around a
sync as vLLM is), the NCCL weight sync (abort, tag the new version, resume) and the FSDP actor/reference
workers (zero reference log-probs; the update records its batch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="the verl extra is not installed")

pytestmark = pytest.mark.timeout(600)

HELD_AFTER = 5
SMALL = ["world.size=small", "train.save_every=100", "train.prompts_per_step=1", "train.group_size=2",
         "train.max_steps=2", "train.micro_batch_size=1", "train.verl.gpus_per_node=1",
         "train.verl.rollout_gpus_per_node=1", "train.verl.agent_workers=1", "train.verl.max_prompt_length=1024",
         "agent.context_budget=3072"]


def call(name: str, arguments: dict[str, Any]) -> str:
    return f"Let me use a tool.</think>\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def run_mode(mode: list[str], small_world: Path, model_dir: Path, tmp_path: Path, *, hold_second: bool) -> dict[str, Any]:
    """``launch.prepare`` + ``launch.run`` with the stand-ins; per question one episode that searches and answers
    right, one that guesses wrong; optionally the second question's first turn held until a weight sync."""
    from deepresearcher.config import load_config
    from deepresearcher.data.formats import load_file
    from deepresearcher.integrations.verl import launch
    from deepresearcher.testing.verl_async import standin_overrides, write_spec

    spec, record = tmp_path / "standin.json", tmp_path / "updates.jsonl"
    verl_overrides = [*standin_overrides(spec), "reward.num_workers=1", "data.shuffle=false"]
    config = load_config(overrides=[f"world.dir={small_world}", f"cache_dir={tmp_path / 'cache'}",
                                    f"train.runs_dir={tmp_path / 'runs'}", *SMALL, *mode,
                                    f"train.verl.overrides=[{', '.join(verl_overrides)}]"])
    prepared = launch.prepare(config, str(model_dir))
    first, second = load_file(prepared.files.train_parquet)[:2]  # the order verl feeds them (data.shuffle=false)
    scripts = {t.question: [[call("web_search", {"query": [t.question]}), f"Found it.</think>\n<answer>{t.golds[0]}</answer>"],
                            ["I will guess.</think>\n<answer>zzzz qqqq</answer>"]] for t in (first, second)}
    write_spec(spec, scripts=scripts, record=record, hold=(second.question, 0, HELD_AFTER) if hold_second else None)

    launch.run(prepared)

    return {"updates": [json.loads(line)["samples"] for line in record.read_text().splitlines()],
            "served": json.loads(record.with_suffix(".server.json").read_text()),
            "steps": [json.loads(line) for line in prepared.files.metrics_jsonl.read_text().splitlines()],
            "first": first, "second": second}


def assert_grpo_updates(updates: list[list[dict[str, Any]]]) -> None:
    """Two updates of one group each: our loss mask, our reward at the last token, GRPO's +-1/sqrt(2) on trained
    tokens only, the sampling log-probs as the old policy (bypass mode)."""
    assert len(updates) == 2 and all(len(samples) == 2 for samples in updates), "one group per update"
    for samples in updates:
        assert len({s["uid"] for s in samples}) == 1
        right, wrong = sorted(samples, key=lambda s: -sum(s["token_level_rewards"]))
        assert sum(right["token_level_rewards"]) == 1.0 and sum(wrong["token_level_rewards"]) == 0.0
        for sample, sign in ((right, 1), (wrong, -1)):
            for advantage, trained in zip(sample["advantages"], sample["response_mask"], strict=True):
                assert advantage == pytest.approx(sign * 2 ** -0.5 if trained else 0.0, abs=1e-4)
        assert 0 in right["response_mask"], "the search result is in the response, untrained"
        assert right["old_log_probs"] == pytest.approx(right["rollout_log_probs"])


def test_fully_async_trains_two_steps_and_resumes_the_episode_a_weight_sync_interrupted(
        small_world: Path, model_dir: Path, tmp_path: Path) -> None:
    """The first group was sampled by weights version 0; the second group's held episode was aborted by the
    sync after step 1 and resumed from its 5 tokens under version 1, so verl's batch shows an episode
    spanning versions 0 and 1; our staleness knob reached verl's rollouter."""
    ran = run_mode(["train.verl.mode=fully_async", "train.verl.staleness_threshold=1", "train.verl.partial_rollout=true"],
                   small_world, model_dir, tmp_path, hold_second=True)
    assert_grpo_updates(ran["updates"])
    step1, step2 = ran["updates"]
    assert [(s["min_global_steps"], s["max_global_steps"]) for s in step1] == [(0, 0), (0, 0)]
    held = next(s for s in step2 if sum(s["token_level_rewards"]) == 1.0)
    assert (held["min_global_steps"], held["max_global_steps"]) == (0, 1), "resumed under the new weights"

    served, second = ran["served"], ran["second"].question
    assert second in served["aborted"]
    turns = [r for r in served["requests"] if r["question"] == second]
    resumed = next(r for r in turns if r["prompt_len"] == turns[0]["prompt_len"] + HELD_AFTER)
    assert (turns[0]["global_steps"], resumed["global_steps"]) == (0, 1)

    trained = [line["data"] for line in ran["steps"] if "actor/pg_loss" in line["data"]]  # verl's trainer metrics
    assert trained and trained[-1]["fully_async/static/max_required_samples"] == 2  # 1 x (1 + staleness 1) x 1
    assert max(line["step"] for line in ran["steps"]) == 2, "two weights versions"


def test_one_step_off_trains_each_step_on_the_batch_generated_during_the_step_before(
        small_world: Path, model_dir: Path, tmp_path: Path) -> None:
    """Step 1 trains the first batch (weights version 0); the second batch is generated after the sync tagged
    1, while step 1 trains; no episode is ever in flight at a sync (verl syncs between two generations)."""
    ran = run_mode(["train.verl.mode=one_step_off"], small_world, model_dir, tmp_path, hold_second=False)
    assert_grpo_updates(ran["updates"])
    step1, step2 = ran["updates"]
    assert {(s["min_global_steps"], s["max_global_steps"]) for s in step1} == {(0, 0)}
    assert {(s["min_global_steps"], s["max_global_steps"]) for s in step2} == {(1, 1)}
    served = ran["served"]
    assert served["aborted"] == []
    assert {r["global_steps"] for r in served["requests"] if r["question"] == ran["second"].question} == {1}
    assert [line["step"] for line in ran["steps"] if "actor/pg_loss" in line["data"]] == [1, 2]
