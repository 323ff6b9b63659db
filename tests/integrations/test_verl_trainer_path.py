"""``launch.run`` as it runs on a GPU node: verl's ``run_ppo`` → ``TaskRunnerV1`` → TransferQueue →
``AgentLoopManagerTQ`` → ``AgentLoopWorkerTQ`` → our agent loop → replay buffer → GRPO → update → metrics.

Two steps of verl's v1 trainer on the CPU, with our real agent loop, tools and environment, verl's own
dataset, dataloader, TransferQueue, reward-loop workers, advantage estimator, validation and file logger.
Stand-ins (``deepresearcher.testing.verl_trainer``) only for what needs a GPU: the vLLM servers (a
scripted Ray actor answering as verl's client does), the NCCL weight sync (it tags the servers with the
new weights version) and the FSDP actor/reference workers (they write back the sampling log-probs and
record the batch of each update).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="the verl extra is not installed")
pytest.importorskip("transfer_queue", reason="verl's TransferQueue is not installed")

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "paper-qwen2.5-7b-verl.yaml"
PROMPTS, GROUP, STEPS = 2, 2, 2
# The sizes a CPU run needs, and nothing else: 2 prompts x 2 rollouts, 2 steps, one stand-in GPU (so no
# sequence parallel), short padded lengths, one agent-loop worker; verl's idle reward workers and its
# TransferQueue storage down from 8 processes each to 1.
SMALL = [f"train.prompts_per_step={PROMPTS}", f"train.group_size={GROUP}", f"train.max_steps={STEPS}",
         "train.micro_batch_size=1", "train.verl.gpus_per_node=1", "train.verl.sequence_parallel_size=1",
         "train.verl.agent_workers=1", "train.verl.max_prompt_length=1024", "agent.context_budget=3072"]
PROCESSES = ["reward.num_workers=1", "transfer_queue.backend.SimpleStorage.num_data_storage_units=1"]


def call(name: str, arguments: dict[str, Any]) -> str:
    return f"Let me use a tool.</think>\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def run_verl(config_path: Path | None, overrides: list[str], model_dir: Path, tmp_path: Path) -> dict[str, Any]:
    """``launch.prepare`` + ``launch.run`` (what ``train --engine verl`` calls) with the stand-ins; per
    question one episode that searches and answers right, one that answers wrong. Returns what was recorded."""
    from deepresearcher.config import load_config
    from deepresearcher.data.formats import load_file
    from deepresearcher.integrations.verl import launch
    from deepresearcher.testing.verl_trainer import standin_overrides, write_spec

    spec, record = tmp_path / "standin.json", tmp_path / "updates.jsonl"
    base = load_config(config_path, overrides=overrides)
    verl_overrides = [*base.train.verl.overrides, *standin_overrides(spec), *PROCESSES]
    config = load_config(config_path, overrides=[*overrides, f"train.verl.overrides=[{', '.join(verl_overrides)}]"])
    prepared = launch.prepare(config, str(model_dir))
    tasks = [*load_file(prepared.files.train_parquet), *load_file(prepared.files.val_parquet)]
    scripts = {t.question: [[call("web_search", {"query": [t.question]}), f"Found it.</think>\n<answer>{t.golds[0]}</answer>"],
                            ["I will guess.</think>\n<answer>zzzz qqqq</answer>"]] for t in tasks}
    write_spec(spec, scripts=scripts, record=record)

    launch.run(prepared)

    return {"updates": [json.loads(line) for line in record.read_text().splitlines()],
            "steps": [json.loads(line) for line in prepared.files.metrics_jsonl.read_text().splitlines()],
            "questions": {t.question for t in load_file(prepared.files.train_parquet)}, "config": config}


def groups_of(update: dict[str, Any]) -> list[list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for sample in update["samples"]:
        groups.setdefault(sample["uid"], []).append(sample)
    return list(groups.values())


@pytest.mark.slow  # the paper recipe's test below runs the same path in CI
def test_launch_run_takes_grpo_steps_through_verls_v1_trainer(small_world: Path, model_dir: Path, tmp_path: Path) -> None:
    """verl's update batch holds our loss mask (observations untrained), our reward at the last token, GRPO's
    advantages of +-1/sqrt(2) on trained tokens only; each step is one update of all its rollouts; and the
    weights versions the servers reported reach verl's staleness metrics (our loop passes them through)."""
    ran = run_verl(None, [f"world.dir={small_world}", "world.size=small", f"cache_dir={tmp_path / 'cache'}",
                          f"train.runs_dir={tmp_path / 'runs'}", "train.run_name=verl-path", "train.save_every=100",
                          *SMALL], model_dir, tmp_path)
    assert len(ran["updates"]) == STEPS, "one update per step"
    for update in ran["updates"]:
        assert len(update["samples"]) == PROMPTS * GROUP and update["extra_info"]["mini_batch_size"] == PROMPTS * GROUP
        groups = groups_of(update)
        assert sorted(len(g) for g in groups) == [GROUP] * PROMPTS
        for group in groups:
            right, wrong = sorted(group, key=lambda s: -sum(s["rm_scores"]))
            assert sum(right["rm_scores"]) == 1.0 and right["rm_scores"][-1] == 1.0
            assert sum(wrong["rm_scores"]) == 0.0
            for sample, sign in ((right, 1), (wrong, -1)):
                for advantage, trained in zip(sample["advantages"], sample["response_mask"], strict=True):
                    assert advantage == pytest.approx(sign * 2 ** -0.5 if trained else 0.0, abs=1e-4)
                assert sample["old_log_probs"] == pytest.approx(sample["rollout_log_probs"])
            assert 0 in right["response_mask"], "the search result is in the response, untrained"
            assert all(right["response_mask"][:5]) and right["response_mask"][-1] == 1

    assert [s["step"] for s in ran["steps"]] == [1, 2]
    for line in ran["steps"]:
        metrics = line["data"]
        assert metrics["critic/score/mean"] == pytest.approx(0.5)
        assert metrics["training/off_policy/trajectory_spans/max"] == 1
        assert metrics["training/off_policy/trajectory_staleness/max"] == 0  # sampled with the latest weights
        assert "actor/pg_loss" in metrics and metrics["training/global_step"] == line["step"]


def test_the_paper_recipe_takes_two_steps_on_dev_parquet_against_the_offline_corpus(
        shared_data_dir: Path, model_dir: Path, tmp_path: Path) -> None:
    """configs/paper-qwen2.5-7b-verl.yaml with only the model, batch, lengths and GPU layout made small
    (SMALL), and the extractive reader for the reader model: the original's dev.parquet questions against the offline eval corpus (real Wikipedia
    paragraphs), validated every step as the recipe says, on two of the original's test questions."""
    from deepresearcher.eval.corpus import build_eval_corpus

    index = build_eval_corpus(tmp_path / "eval-corpus", shared_data_dir).index_dir
    ran = run_verl(RECIPE, [
        "train.data=[{kind: benchmark, name: deepresearcher, split: dev}]",
        "train.eval_data=[{kind: benchmark, name: deepresearcher, split: test, limit: 2}]", "train.eval_tasks=2",
        "search.backend=local", f"search.index={index}", "browse.reader=extractive", f"cache_dir={tmp_path / 'cache'}",
        f"train.runs_dir={tmp_path / 'runs'}", *SMALL], model_dir, tmp_path)
    config = ran["config"]
    assert config.train.eval_every == 1 and config.train.verl.optimizer_offload  # the recipe's, untouched
    assert (config.agent.protocol, config.reward.metric) == ("deepresearcher", "deepresearcher")
    assert len(ran["updates"]) == STEPS
    for update in ran["updates"]:
        assert len(update["samples"]) == PROMPTS * GROUP
        for group in groups_of(update):
            scores = sorted(sum(s["rm_scores"]) for s in group)
            assert scores[0] < scores[-1], "the searching, right episode outscores the guess"
    steps = ran["steps"]
    assert [s["step"] for s in steps] == [1, 2]
    for line in steps:
        metrics = line["data"]
        assert any(k.startswith("val-core/") for k in metrics), "validated every step (trainer.test_freq=1)"
        assert metrics["training/off_policy/trajectory_staleness/max"] == 0
