"""GRPO end to end: a tiny model, the real local environment (tiny world, tantivy index), TRL, resume."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from deepresearcher.config import Config, load_config
from deepresearcher.train.grpo import train_grpo
from deepresearcher.train.rollout import Rollouts, score_trajectories, task_dict
from deepresearcher.train.run_dir import read_metrics

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
torch.set_num_threads(1)


def _config(cache: Path, runs: Path, name: str, steps: int) -> Config:
    return load_config(None, [
        f"cache_dir={cache}", "world.size=tiny", "search.top_k=2", "search.snippet_chars=60", "browse.top_passages=1",
        "agent.max_turns=2", "agent.max_tokens_per_turn=12", "agent.context_budget=1024",
        f"train.runs_dir={runs}", f"train.run_name={name}", "train.group_size=2", "train.prompts_per_step=2",
        "train.micro_batch_size=2", f"train.max_steps={steps}", "train.save_every=1", "train.learning_rate=1e-3",
        "train.sample_trajectories=4", "train.compact_prompt=true",
    ])


def _run(config: Config, model: Path, resume: bool = False) -> Path:
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    tasks = [task_dict(t) for t in load_tasks(ensure_world(config), "train")][:20]
    rollouts = Rollouts(config, seed=0)
    try:
        result = train_grpo(config, model, tasks, rollouts.collect, lambda ts, batch: score_trajectories(ts, batch, config),
                            resume=resume, show_progress=False)
    finally:
        rollouts.close()
    return result.run_dir


def _sampled_ids(run: Path, step: int) -> list[str]:
    lines = (run / "samples" / f"step_{step:05d}.jsonl").read_text().splitlines()
    return [json.loads(line)["task_id"] for line in lines]


def _sampled_tokens(run: Path, step: int) -> list[list[int]]:
    lines = (run / "samples" / f"step_{step:05d}.jsonl").read_text().splitlines()
    return [[t for s in json.loads(line)["segments"] for t in s["token_ids"]] for line in lines]


@pytest.mark.timeout(180)
def test_two_steps_then_resume_matches_uninterrupted_run(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Two GRPO steps write metrics, TensorBoard events, samples and checkpoints and change the weights; resuming from the
    step-2 checkpoint runs step 3 exactly as an uninterrupted 3-step run does: same prompts, same weights,
    same sampling seed, hence the same sampled tokens."""
    from safetensors.torch import load_file

    cache, runs = tmp_path / "cache", tmp_path / "runs"
    stopped = _run(_config(cache, runs, "stopped", 2), tiny_model_dir)
    metrics = read_metrics(stopped / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2]
    for key in ("reward", "f1", "format_error_rate", "tool_calls", "response_tokens", "kl", "entropy", "zero_signal_share"):
        assert key in metrics[-1], key
    from deepresearcher.reward import ANSWER_METRICS

    assert set(ANSWER_METRICS) <= set(metrics[-1]), "every answer metric reward.metric can name is logged"
    assert -1.0 <= metrics[0]["reward"] <= 1.0
    assert (stopped / "checkpoints" / "checkpoint-2").is_dir()
    assert (stopped / "config.yaml").is_file()
    events = list((stopped / "tensorboard").rglob("events.out.tfevents*"))
    assert events, "no TensorBoard event file in the run"
    # The research behaviours of each step's 4 rollouts, with the episodes behind each rate, in both logs.
    assert metrics[-1]["behaviour/repeated_calls_n"] == 4 and metrics[-1]["behaviour/repeated_calls"] >= 0
    assert "behaviour/grounded" in metrics[-1] and "behaviour/abstention_recall_n" in metrics[-1]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = [t for e in events for t in EventAccumulator(str(e)).Reload().Tags()["scalars"]]
    assert any(t.endswith("behaviour/repeated_calls") for t in tags), tags
    sampled = [json.loads(line) for line in (stopped / "samples" / "step_00002.jsonl").read_text().splitlines()]
    assert all("tags" in s["metadata"]["behaviour"] for s in sampled), "each sample keeps its behaviours"
    before = load_file(str(tiny_model_dir / "model.safetensors"))
    after = load_file(str(stopped / "model" / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before), "GRPO did not change any weight"

    resumed = _run(_config(cache, runs, "stopped", 3), tiny_model_dir, resume=True)
    assert [m["step"] for m in read_metrics(resumed / "metrics.jsonl")] == [1, 2, 3]
    straight = _run(_config(cache, runs, "straight", 3), tiny_model_dir)
    assert _sampled_ids(resumed, 3) == _sampled_ids(straight, 3)
    assert _sampled_tokens(resumed, 3) == _sampled_tokens(straight, 3)


@pytest.mark.timeout(180)
def test_eval_every_on_a_world_evaluates_the_worlds_held_out_tasks_without_naming_them(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    """`train.eval_every` alone turns on held-out evaluation: on a world run its default held-out set is the
    world's test tasks (`train.eval_data` unset), evaluated live at the step and after training."""
    from deepresearcher.train.pipeline import run_grpo

    config = _config(tmp_path / "cache", tmp_path / "runs", "every", 1)
    config = config.model_copy(update={"train": config.train.model_copy(
        update={"eval_every": 1, "eval_tasks": 3, "eval_per_type": 0})})
    assert config.train.eval_data is None
    result = run_grpo(config, model=tiny_model_dir, show_progress=False)
    (metrics,) = read_metrics(result.run_dir / "metrics.jsonl")
    assert "heldout_f1" in metrics
    rows = (result.run_dir / "eval_after_grpo.jsonl").read_text().splitlines()
    assert len(rows) == 3 and (result.run_dir / "eval_step_00001.jsonl").is_file()


@pytest.mark.parametrize(("schedule", "last_lr"), [("constant", 1e-3), ("cosine", 0.0), ("linear", 0.0)])
def test_lr_schedule_reaches_transformers_scheduler(tmp_path: Path, schedule: str, last_lr: float) -> None:
    """The schedule TRL builds from our arguments: constant stays at the peak, the decays end at 0 at max_steps."""
    from transformers import get_scheduler

    from deepresearcher.train.grpo import trainer_arguments
    from deepresearcher.train.run_dir import RunDir

    config = load_config(None, [f"train.runs_dir={tmp_path}", "train.max_steps=10", "train.learning_rate=1e-3",
                                f"train.lr_schedule={schedule}", "train.prompts_per_step=1", "train.group_size=8"])
    args = trainer_arguments(config, RunDir(tmp_path / "run"), [])
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=args["learning_rate"])
    scheduler = get_scheduler(args["lr_scheduler_type"], optimizer, num_warmup_steps=0, num_training_steps=10)
    for _ in range(10):
        optimizer.step()
        scheduler.step()
    assert scheduler.get_last_lr()[0] == pytest.approx(last_lr, abs=1e-9)
