"""Asynchronous GRPO (``train.async_grpo``): TRL's AsyncGRPOTrainer with our agent loop as its rollout worker.

Real parts: a tiny model, the tiny world's tantivy index, TRL's trainer (its queue, drop rule, packing, loss and
checkpoints), our engine. On the CPU, tree attention runs with SDPA (``train.tree_attention``, checked against a
plain forward pass in ``test_tree_attention.py``). The scorer of the end-to-end runs gives each episode a reward
from its sampled tokens, so groups carry signal even from a random model and the weights move.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

from deepresearcher.config import Config, load_config
from deepresearcher.train import async_worker
from deepresearcher.train.async_grpo import ROLLOUT_STATE, train_async_grpo
from deepresearcher.train.async_worker import EngineWeightTransfer, StalenessQueue, group_samples, prompt_stream
from deepresearcher.train.rollout import Rollouts, score_trajectories, task_dict
from deepresearcher.train.run_dir import read_metrics

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
torch.set_num_threads(1)


def _config(cache: Path, runs: Path, name: str, steps: int, *extra: str) -> Config:
    return load_config(None, [
        f"cache_dir={cache}", "world.size=tiny", "search.top_k=2", "search.snippet_chars=60", "browse.top_passages=1",
        "agent.max_turns=2", "agent.max_tokens_per_turn=12", "agent.context_budget=1024",
        f"train.runs_dir={runs}", f"train.run_name={name}", "train.group_size=2", "train.prompts_per_step=2",
        "train.micro_batch_size=2", f"train.max_steps={steps}", "train.save_every=1", "train.learning_rate=3e-2",
        "train.sample_trajectories=0", "train.compact_prompt=true", "train.async_grpo.enabled=true", *extra,
    ])


def _tasks(config: Config) -> list[dict]:
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    return [task_dict(t) for t in load_tasks(ensure_world(config), "train")][:20]


def _token_reward(config: Config):
    def score(trajectories, tasks):
        scored = score_trajectories(trajectories, tasks, config)
        digests = [hashlib.blake2b(str(t.completion_ids).encode(), digest_size=2).digest() for t in trajectories]
        return [{**scores, "reward": digest[0] / 255} for scores, digest in zip(scored, digests, strict=True)]
    return score


def _train(config: Config, model: Path, resume: bool = False):
    from deepresearcher.train.heldout import evaluate_model

    rollouts = Rollouts(config, seed=0)

    def held_out(policy, tokenizer, step: int, *, vllm_llm=None) -> dict[str, float]:  # the live policy on two tasks
        assert vllm_llm is None, "the asynchronous trainer has no colocated vLLM"
        result = evaluate_model(policy, tokenizer, _tasks(config)[-2:], rollouts, config)
        return {"heldout_f1": result.by_type()["all"]["f1"]}

    try:
        return train_async_grpo(config, model, _tasks(config), rollouts, _token_reward(config), resume=resume,
                                show_progress=False, held_out=held_out)
    finally:
        rollouts.close()


class _Capture:
    """The run's weight transfer and rollout worker, kept for inspection after training."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.transfers: list[EngineWeightTransfer] = []
        self.workers: list = []
        capture = self

        class Transfer(EngineWeightTransfer):
            def __init__(self, engine):
                super().__init__(engine)
                capture.transfers.append(self)

        class Worker(async_worker.AgentRolloutWorker):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                capture.workers.append(self)

        monkeypatch.setattr(async_worker, "EngineWeightTransfer", Transfer)
        monkeypatch.setattr(async_worker, "AgentRolloutWorker", Worker)


def _logits(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0]


def group_samples_fake(version: int, group: int):
    from trl.experimental.async_grpo.async_rollout_worker import RolloutSample

    return RolloutSample(prompt=[], completion=[], input_ids=np.array([1, 2, 3]), completion_mask=np.array([0, 1, 1]),
                         old_log_probs=np.array([0.0, -1.0, -2.0], dtype=np.float32), advantage=1.0,
                         model_version=version, group_id=group, metrics={}, enqueued_at=time.time())


def test_group_samples_tag_version_and_align_logprobs_and_mask() -> None:
    """Each episode becomes one sample: prompt + completion ids, the env mask over them (0 on the prompt and on tool
    output), the sampling log-probabilities at the same positions, the group's version and TRL's advantages."""
    from deepresearcher.agent.trajectory import Segment, Trajectory

    def episode(sampled: list[int], logprobs: list[float]) -> Trajectory:
        return Trajectory(task_id="t", question="q", segments=[
            Segment(source="prompt", token_ids=[5, 6]), Segment(source="policy", token_ids=sampled, logprobs=logprobs),
            Segment(source="env", token_ids=[9, 9])])

    trajectories = [episode([7, 8], [-0.5, -0.25]), episode([4], [-1.5])]
    scores = [{"reward": 1.0, "f1": 1.0}, {"reward": 0.0, "f1": 0.0}]
    a, b = group_samples(trajectories, scores, group_id=3, model_version=7, eos_id=0)
    assert a.input_ids.tolist() == [5, 6, 7, 8, 9, 9] and a.completion_mask.tolist() == [0, 0, 1, 1, 0, 0]
    assert a.old_log_probs[2:4].tolist() == [-0.5, -0.25]
    assert (a.model_version, a.group_id, b.model_version) == (7, 3, 7)
    assert a.advantage == pytest.approx(1.0, abs=1e-6) and b.advantage == pytest.approx(-1.0, abs=1e-6)
    assert a.metrics["f1"] == 1.0 and a.metrics["zero_signal_share"] == 0.0


def test_group_samples_of_a_group_without_signal_train_on_nothing_when_dropped() -> None:
    """``train.drop_zero_signal_groups``: a group whose rewards are all equal keeps its samples and metrics with an
    all-zero completion mask; a group with signal keeps its mask either way."""
    from deepresearcher.agent.trajectory import Segment, Trajectory

    episode = Trajectory(task_id="t", question="q", segments=[
        Segment(source="prompt", token_ids=[5]), Segment(source="policy", token_ids=[7, 8], logprobs=[-0.5, -0.25])])
    same = [{"reward": 0.5, "f1": 0.5}] * 2
    dropped = group_samples([episode, episode], same, group_id=1, model_version=0, eos_id=0, drop_zero_signal=True)
    kept = group_samples([episode, episode], same, group_id=1, model_version=0, eos_id=0)
    assert [s.completion_mask.tolist() for s in dropped] == [[0, 0, 0]] * 2
    assert [s.completion_mask.tolist() for s in kept] == [[0, 1, 1]] * 2
    assert dropped[0].metrics["zero_signal_share"] == 1.0
    signal = group_samples([episode, episode], [{"reward": 1.0}, {"reward": 0.0}], group_id=2, model_version=0,
                           eos_id=0, drop_zero_signal=True)
    assert [s.completion_mask.tolist() for s in signal] == [[0, 1, 1]] * 2


def test_trl_drops_samples_staler_than_max_staleness_and_the_histogram_counts_them() -> None:
    """TRL's own queue dataset over our queue: a sample more than ``max_staleness`` versions behind the trainer is
    dropped and counted; the histogram records every sample taken at the staleness TRL judged it by."""
    from accelerate import PartialState
    from trl.experimental.async_grpo.async_grpo_trainer import RolloutQueueDataset

    PartialState(cpu=True)  # TRL's logger needs accelerate's state, as in a trainer
    version = {"now": 5}
    buffer = StalenessQueue(lambda: version["now"])
    for v in (5, 4, 3, 2, 5):
        buffer.put(group_samples_fake(v, v))
    metrics: dict = defaultdict(list)
    dataset = RolloutQueueDataset(buffer, lambda: version["now"], lambda s: None, 60, metrics, max_staleness=2,
                                  poll_interval_s=0.1)
    taken = [item["group_id"] for _, item in zip(range(4), iter(dataset), strict=False)]
    assert taken == [5, 4, 3, 5]  # version 2 is 3 behind: dropped
    assert sum(metrics["sample/dropped_stale_total"]) == 1
    assert buffer.take_histogram() == {0: 2, 1: 1, 2: 1, 3: 1}
    assert buffer.take_histogram() == {}


def test_prompt_stream_is_a_seeded_sequence_of_epochs() -> None:
    tasks = [{"id": str(i)} for i in range(5)]
    first = [prompt_stream(tasks, 0, i)["id"] for i in range(10)]
    assert sorted(first[:5]) == sorted(first[5:]) == [t["id"] for t in tasks]  # each epoch covers every task once
    assert first == [prompt_stream(tasks, 0, i)["id"] for i in range(10)]
    assert first != [prompt_stream(tasks, 1, i)["id"] for i in range(10)]


def test_weight_transfer_pauses_decoding_and_loads_the_weights(tiny_model_dir: Path) -> None:
    """pause() holds the engine between forward passes; send_weights() of TRL's parameter stream makes the engine's
    logits the trainer's."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.experimental.async_grpo.async_grpo_trainer import _iter_vllm_named_params

    from deepresearcher.inference.engine import LocalEngine

    trainer = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    with torch.no_grad():
        for p in trainer.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    engine = LocalEngine(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).eval(),
                         AutoTokenizer.from_pretrained(str(tiny_model_dir)))
    ids = [3, 17, 40, 41]
    assert not torch.allclose(_logits(engine.model, ids), _logits(trainer, ids))
    transfer = EngineWeightTransfer(engine)
    transfer.pause()
    assert not engine.weights_lock.acquire(blocking=False), "a decode step could run while paused"
    transfer.send_weights(_iter_vllm_named_params(trainer))
    transfer.resume()
    assert engine.weights_lock.acquire(blocking=False)
    engine.weights_lock.release()
    torch.testing.assert_close(_logits(engine.model, ids), _logits(trainer, ids), rtol=0, atol=0)


@pytest.mark.timeout(240)
def test_async_run_syncs_weights_logs_staleness_and_resumes_the_stream(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two asynchronous steps, the held-out evaluation of the live policy at step 2: metrics.jsonl has a line per step with the staleness histogram, whose samples above
    max_staleness are exactly the ones TRL dropped; the engine's logits equal the trained model's after the last
    sync (and not the starting model's); resuming from step 2 continues the rollout stream at the checkpoint's
    position with its policy version."""
    from transformers import AutoModelForCausalLM

    capture = _Capture(monkeypatch)
    config = _config(tmp_path / "cache", tmp_path / "runs", "a", 2, "train.async_grpo.max_staleness=0",
                     "train.async_grpo.inflight_groups=4", "train.eval_every=2")
    result = _train(config, tiny_model_dir)
    metrics = read_metrics(result.run_dir / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2]
    assert "heldout_f1" in metrics[1] and "heldout_f1" not in metrics[0]  # the live policy decoded mid-training
    for m in metrics:
        histogram = {int(k): n for k, n in m["staleness_histogram"].items()}
        assert sum(n for k, n in histogram.items() if k > 0) == m["dropped_stale"]
        assert histogram.get(0, 0) >= 4  # a step trains prompts_per_step x group_size fresh samples
        for key in ("reward", "f1", "loss", "rollout_wait_seconds", "step_seconds"):
            assert key in m, key

    (transfer,) = capture.transfers
    assert transfer.syncs == 3  # the cold sync at train begin, then one per step
    ids = [3, 17, 40, 41]
    trained = AutoModelForCausalLM.from_pretrained(str(result.model_dir))
    base = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    assert not torch.allclose(_logits(trained, ids), _logits(base, ids)), "training did not move the weights"
    torch.testing.assert_close(_logits(transfer.engine.model, ids), _logits(trained, ids), rtol=0, atol=0)

    state = json.loads((result.run_dir / "checkpoints" / "checkpoint-2" / ROLLOUT_STATE).read_text())
    assert state["model_version"] == 3 and state["prompt_index"] >= 2
    resumed = _train(_config(tmp_path / "cache", tmp_path / "runs", "a", 3, "train.async_grpo.max_staleness=0",
                             "train.async_grpo.inflight_groups=4"), tiny_model_dir, resume=True)
    assert [m["step"] for m in read_metrics(resumed.run_dir / "metrics.jsonl")] == [1, 2, 3]
    worker = capture.workers[-1]
    assert worker.start_index == state["prompt_index"]
    assert worker.model_version == state["model_version"] + 2  # restored, then the cold sync and step 3's sync


def test_dry_run_names_the_trainer_and_several_processes_are_refused(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    from deepresearcher.errors import ConfigError
    from deepresearcher.train.async_grpo import async_args
    from deepresearcher.train.grpo import plan
    from deepresearcher.train.run_dir import RunDir

    config = load_config(None, ["train.async_grpo.enabled=true", "train.async_grpo.max_staleness=2"])
    assert plan(config)["trainer"].startswith("AsyncGRPOTrainer (max_staleness 2")
    assert plan(config)["tree_attention"] == "sdpa (the trainer runs on the CPU)"
    assert plan(load_config(None, []))["trainer"].startswith("GRPOTrainer")
    assert "tree_attention" not in plan(load_config(None, []))
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="one process"):
        async_args(config, RunDir(tmp_path / "run"), [])
