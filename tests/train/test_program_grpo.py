"""GRPO trains an agent given as a program (``train.agent``): the ``openai`` SDK example of ``examples/``, unchanged,
run once per episode against the live tiny model behind the policy endpoint and the tiny world's tools."""

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


@pytest.mark.timeout(300)
def test_two_grpo_steps_train_the_example_agent(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Two steps of two groups of two episodes: every episode is a run of the program (its record says how it ended),
    the trained tokens are the ones the endpoint recorded it sampling, the step's metrics are written, the weights
    move, and a held-out evaluation of the program runs through the same path."""
    from safetensors.torch import load_file

    from deepresearcher.train.pipeline import run_grpo

    config = load_config(None, [
        f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", "search.top_k=2", "search.snippet_chars=60",
        "browse.top_passages=1", "agent.max_turns=2", "agent.max_tokens_per_turn=12", "agent.context_budget=1024",
        f"train.runs_dir={tmp_path / 'runs'}", "train.run_name=program", "train.group_size=2",
        "train.prompts_per_step=2", "train.micro_batch_size=2", "train.max_steps=2", "train.learning_rate=1e-3",
        "train.sample_trajectories=4", "train.compact_prompt=true", "train.eval_every=2", "train.eval_tasks=2",
        "train.eval_per_type=0", f"train.agent.program={EXAMPLE}", "train.agent.timeout_s=120",
    ])
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
    before = load_file(str(tiny_model_dir / "model.safetensors"))
    after = load_file(str(result.run_dir / "model" / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before), "GRPO did not change any weight"
