"""``train.drop_zero_signal_groups``: groups whose rewards are all equal leave the loss and its token count."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from deepresearcher.agent.trajectory import Segment, Trajectory
from deepresearcher.train.grpo import rollout_output, zero_signal_rollouts
from deepresearcher.train.loss import grpo_loss


def test_zero_signal_rollouts_marks_whole_groups_with_equal_rewards() -> None:
    rewards = [1.0, 1.0, 0.0, 1.0, -1.0, -1.0, 0.5, 0.25]
    assert zero_signal_rollouts(rewards, 2) == [True, True, False, False, True, True, False, False]
    assert zero_signal_rollouts(rewards, 4) == [False] * 8
    with pytest.raises(ValueError, match="groups of 3"):
        zero_signal_rollouts(rewards, 3)


def test_dropped_rollouts_keep_their_ids_and_train_on_nothing() -> None:
    def trajectory(first: int) -> Trajectory:
        return Trajectory(segments=[Segment(source="prompt", token_ids=[1, 2]),
                                    Segment(source="policy", token_ids=[first, first + 1], logprobs=[-0.5, -0.5]),
                                    Segment(source="env", token_ids=[9]),
                                    Segment(source="policy", token_ids=[first + 2], logprobs=[-1.0])])

    rewards = [1.0, 1.0, 1.0, 0.0]
    out = rollout_output([trajectory(10 * i) for i in range(1, 5)], rewards, eos_id=99,
                         dropped=zero_signal_rollouts(rewards, 2))
    assert out["completion_ids"] == [[10, 11, 9, 12], [20, 21, 9, 22], [30, 31, 9, 32], [40, 41, 9, 42]]
    assert out["env_mask"] == [[0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 1], [1, 1, 0, 1]]
    assert out["reward"] == rewards


def test_trl_divides_by_the_tokens_of_the_groups_with_signal(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Through TRL's own loss: with the zero-signal group's mask at 0 the step's loss is the loss of the signal
    group alone, larger than the undropped loss by the share of tokens the dropped group held."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=4,
                      gradient_accumulation_steps=1, beta=0.0, epsilon=0.2, loss_type="dapo",
                      use_cpu=True, report_to=[], max_steps=1, temperature=1.0)
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **_: [0.0] * len(completions), args=args,
                          train_dataset=datasets.Dataset.from_list([{"prompt": "a"}] * 4), processing_class=tokenizer)
    trainer.current_gradient_accumulation_steps = 1
    torch.manual_seed(0)
    rewards = [1.0, 0.0, 0.5, 0.5]  # the second group has no signal
    advantages = torch.tensor([0.7, -0.7, 0.0, 0.0])
    prompt = torch.randint(3, 300, (4, 5))
    completion = torch.randint(3, 300, (4, 6))
    old = torch.zeros(4, 6) - 5.0 + 0.3 * torch.randn(4, 6)
    kept = torch.tensor([[1] * 6] * 4)
    dropped = torch.tensor([[0] * 6 if gone else [1] * 6 for gone in zero_signal_rollouts(rewards, 2)])

    def loss(tool_mask: torch.Tensor) -> float:
        inputs = {"prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt), "completion_ids": completion,
                  "completion_mask": torch.ones_like(completion), "tool_mask": tool_mask, "advantages": advantages,
                  "old_per_token_logps": old, "num_items_in_batch": tool_mask.sum()}
        return float(trainer._compute_loss(model, inputs).detach())

    model.train()
    logps, _, _ = trainer._get_per_token_logps_and_entropies(
        model, torch.cat([prompt, completion], 1), torch.ones(4, 11, dtype=torch.long), 6)
    signal_only = grpo_loss(logps[:2], old[:2], advantages[:2], kept[:2]).loss
    assert loss(dropped) == pytest.approx(float(signal_only), rel=1e-5, abs=1e-6)
    assert loss(kept) == pytest.approx(float(signal_only) / 2, rel=1e-5, abs=1e-6)
