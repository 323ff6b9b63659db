"""``launch.run`` as it runs on a GPU node: verl's ``run_ppo`` → ``TaskRunnerV1`` → TransferQueue →
``AgentLoopManagerTQ`` → ``AgentLoopWorkerTQ`` → our agent loop → replay buffer → GRPO → update → metrics.

Two steps of verl's v1 trainer on the CPU, with our real agent loop, tools and local environment of a
small world, verl's own dataset, dataloader, TransferQueue, reward-loop workers, advantage estimator and
file logger. Stand-ins (``deepresearcher.testing.verl_trainer``) only for what needs a GPU: the vLLM
servers (a scripted Ray actor answering as verl's client does), the NCCL weight sync (it tags the servers
with the new weights version) and the FSDP actor/reference workers (they write back the sampling
log-probs and record the batch of each update).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="the verl extra is not installed")
pytest.importorskip("transfer_queue", reason="verl's TransferQueue is not installed")

pytestmark = pytest.mark.slow

PROMPTS, GROUP, STEPS = 2, 2, 2


def call(name: str, arguments: dict[str, Any]) -> str:
    return f"Let me use a tool.</think>\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def test_launch_run_takes_grpo_steps_through_verls_v1_trainer(small_world: Path, model_dir: Path, tmp_path: Path) -> None:
    """Every group holds one episode that searches and answers right and one that answers wrong: verl's
    update batch holds our loss mask (observations untrained), our reward at the last token, GRPO's
    advantages of +-1/sqrt(2) on trained tokens only; each step is one update of all its rollouts; and the
    weights versions the servers reported reach verl's staleness metrics (our loop passes them through)."""
    from deepresearcher.config import load_config
    from deepresearcher.data.formats import load_file
    from deepresearcher.integrations.verl import launch
    from deepresearcher.testing.verl_trainer import standin_overrides, write_spec

    runs = tmp_path / "runs"
    spec = tmp_path / "standin.json"
    record = tmp_path / "updates.jsonl"
    verl_overrides = [*standin_overrides(spec), "reward.num_workers=1",  # our loop scores; verl's workers idle
                      "transfer_queue.backend.SimpleStorage.num_data_storage_units=1"]  # 8 processes by default
    config = load_config(overrides=[
        f"world.dir={small_world}", "world.size=small", f"cache_dir={tmp_path / 'cache'}", f"train.runs_dir={runs}",
        "train.run_name=verl-path", f"train.prompts_per_step={PROMPTS}", f"train.group_size={GROUP}",
        f"train.max_steps={STEPS}", "train.micro_batch_size=1", "train.save_every=100", "train.verl.gpus_per_node=1",
        "train.verl.agent_workers=1", "train.verl.max_prompt_length=1024", "agent.context_budget=3072",
        f"train.verl.overrides=[{', '.join(verl_overrides)}]",
    ])
    prepared = launch.prepare(config, str(model_dir))
    tasks = load_file(prepared.files.train_parquet)
    scripts = {t.question: [[call("web_search", {"query": [t.question]}), f"Found it.</think>\n<answer>{t.golds[0]}</answer>"],
                            ["I will guess.</think>\n<answer>zzzz qqqq</answer>"]] for t in tasks}
    write_spec(spec, scripts=scripts, record=record)

    launch.run(prepared)

    updates = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(updates) == STEPS, "one update per step"
    for update in updates:
        samples = update["samples"]
        assert len(samples) == PROMPTS * GROUP and update["extra_info"]["mini_batch_size"] == PROMPTS * GROUP
        groups: dict[str, list[dict[str, Any]]] = {}
        for sample in samples:
            groups.setdefault(sample["uid"], []).append(sample)
        assert sorted(len(g) for g in groups.values()) == [GROUP] * PROMPTS
        for group in groups.values():
            right, wrong = sorted(group, key=lambda s: -sum(s["rm_scores"]))
            assert sum(right["rm_scores"]) == 1.0 and right["rm_scores"][-1] == 1.0
            assert sum(wrong["rm_scores"]) == 0.0
            for sample, sign in ((right, 1), (wrong, -1)):
                mask = sample["response_mask"]
                for advantage, trained in zip(sample["advantages"], mask, strict=True):
                    assert advantage == pytest.approx(sign * 2 ** -0.5 if trained else 0.0, abs=1e-4)
                assert sample["old_log_probs"] == pytest.approx(sample["rollout_log_probs"])
            assert 0 in right["response_mask"], "the search result is in the response, untrained"
            assert all(right["response_mask"][:5]) and right["response_mask"][-1] == 1

    steps = [json.loads(line) for line in prepared.files.metrics_jsonl.read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    for line in steps:
        metrics = line["data"]
        assert metrics["critic/score/mean"] == pytest.approx(0.5)
        assert metrics["training/off_policy/trajectory_spans/max"] == 1
        assert metrics["training/off_policy/trajectory_staleness/max"] == 0  # sampled with the latest weights
        assert "actor/pg_loss" in metrics and metrics["training/global_step"] == line["step"]
