"""GRPO trains an agent given as a program (``train.agent``): the ``openai`` SDK example of ``examples/``, unchanged,
run once per episode against the live tiny model behind the policy endpoint and the tiny world's tools, by the
synchronous trainer and by the asynchronous one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from deepresearcher.config import load_config
from deepresearcher.train.run_dir import read_metrics

pytest.importorskip("openai")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
torch.set_num_threads(1)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "openai_agent.py"


def _config(tmp_path: Path, *extra: str):
    return load_config(None, [
        f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", "search.top_k=2", "search.snippet_chars=60",
        "browse.top_passages=1", "agent.max_turns=2", "agent.max_tokens_per_turn=12", "agent.context_budget=1024",
        f"train.runs_dir={tmp_path / 'runs'}", "train.run_name=program", "train.group_size=2",
        "train.prompts_per_step=2", "train.micro_batch_size=2", "train.max_steps=2", "train.learning_rate=1e-3",
        "train.sample_trajectories=4", "train.compact_prompt=true", "train.eval_every=2", "train.eval_tasks=2",
        "train.eval_per_type=0", f"train.agent.program={EXAMPLE}", "train.agent.timeout_s=120", *extra,
    ])


def _weights_moved(start: Path, trained: Path) -> bool:
    from safetensors.torch import load_file

    before, after = load_file(str(start / "model.safetensors")), load_file(str(trained / "model.safetensors"))
    return any(not torch.equal(before[k], after[k]) for k in before)


@pytest.mark.timeout(300)
def test_two_grpo_steps_train_the_example_agent(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Two steps of two groups of two episodes: every episode is a run of the program (its record says how it ended),
    the trained tokens are the ones the endpoint recorded it sampling, the step's metrics are written, the weights
    move, and a held-out evaluation of the program runs through the same path."""
    from deepresearcher.train.pipeline import run_grpo

    config = _config(tmp_path)
    result = run_grpo(config, model=tiny_model_dir, show_progress=False)
    metrics = read_metrics(result.run_dir / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2] and "heldout_f1" in metrics[-1]
    assert metrics[-1]["rollouts"] == 4 and -1.0 <= metrics[-1]["reward"] <= 1.0
    for step in (1, 2):
        samples = [json.loads(line) for line in (result.run_dir / "samples" / f"step_{step:05d}.jsonl").read_text()
                   .splitlines()]
        assert len(samples) == 4
        # the random tiny model seldom closes its thinking, so its programs mostly print an empty answer
        assert {s["metadata"]["program"] for s in samples} <= {"answered", "no_answer"}
        for sample in samples:  # one prompt, then what the policy sampled and the tools' observations
            sources = [segment["source"] for segment in sample["segments"]]
            assert sources[0] == "prompt" and sources[1] == "policy" and set(sources[1:]) <= {"policy", "env"}
    rows = (result.run_dir / "eval_after_grpo.jsonl").read_text().splitlines()
    assert len(rows) == 2
    assert _weights_moved(tiny_model_dir, result.run_dir / "model"), "GRPO did not change any weight"


@pytest.mark.timeout(300)
def test_two_asynchronous_grpo_steps_train_the_example_agent(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The asynchronous trainer's worker runs the program for every episode of its groups: the scorer sees only
    program runs (each record says how it ended) whose completions are what the endpoint recorded the policy
    sampling; two steps train on them, log their staleness and move the weights. The reward here varies with the
    sampled tokens (the random tiny model seldom answers, and a group of equal rewards trains nothing)."""
    from deepresearcher.train.async_grpo import train_async_grpo
    from deepresearcher.train.rollout import Rollouts, score_trajectories, task_dict
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    config = _config(tmp_path, "train.async_grpo.enabled=true", "train.async_grpo.inflight_groups=2",
                     "train.async_grpo.max_staleness=1", "train.eval_every=0")
    tasks = [task_dict(t) for t in load_tasks(ensure_world(config), "train")][:8]
    seen: list[tuple[str, int]] = []

    def scorer(trajectories, batch):
        seen.extend((t.metadata["program"], len(t.completion_ids)) for t in trajectories)
        scores = score_trajectories(trajectories, batch, config)
        return [{**s, "reward": (sum(t.completion_ids) % 7) / 7} for s, t in zip(scores, trajectories, strict=True)]

    rollouts = Rollouts(config, seed=0)
    try:
        result = train_async_grpo(config, tiny_model_dir, tasks, rollouts, scorer, show_progress=False)
    finally:
        rollouts.close()
    metrics = read_metrics(result.run_dir / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2] and all("staleness_histogram" in m for m in metrics)
    assert len(seen) >= 2 * 2 * 2 and {status for status, _ in seen} <= {"answered", "no_answer"}
    assert all(tokens > 0 for _, tokens in seen), "a program's episode trained no sampled token"
    assert _weights_moved(tiny_model_dir, result.model_dir), "asynchronous GRPO did not change any weight"
