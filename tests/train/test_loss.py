"""The GRPO loss path on hand-computed cases, and TRL's loss equal to ours on the same batch."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch

from deepresearcher.train.loss import grpo_loss, group_advantages, zero_signal_share

torch.set_num_threads(1)


def test_group_advantages_are_relative_to_each_group() -> None:
    """Mean-centred and std-scaled within each group; an all-equal group gets zeros and counts as zero-signal."""
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0])
    adv = group_advantages(rewards, group_size=4)
    std = math.sqrt(4 * 0.25 / 3)  # Bessel-corrected std of [1, 0, 0, 1]
    expected = [0.5 / (std + 1e-4), -0.5 / (std + 1e-4)] * 1
    assert adv[:2].tolist() == pytest.approx(expected, rel=1e-6)
    assert adv[4:].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert zero_signal_share(rewards, 4) == 0.5
    assert group_advantages(rewards, 4, scale=False)[:4].tolist() == [0.5, -0.5, -0.5, 0.5]


def test_observation_tokens_contribute_nothing() -> None:
    """Changing the logprob of a masked (tool) token changes neither the loss nor any gradient."""
    mask = torch.tensor([[1, 0, 0, 1]])
    adv = torch.tensor([1.5])
    base = torch.tensor([[-1.0, -2.0, -3.0, -0.5]])

    def run(logps_values: torch.Tensor) -> tuple[float, torch.Tensor]:
        logps = logps_values.clone().requires_grad_(True)
        old = base.clone()
        parts = grpo_loss(logps, old, adv, mask, ref_logps=base - 0.1, kl_coef=0.1,
                          entropies=torch.ones_like(base), entropy_coef=0.01)
        parts.loss.backward()
        return float(parts.loss), logps.grad

    loss_a, grad_a = run(base)
    changed = base.clone()
    changed[0, 1] = -9.0  # an observation token becomes far less likely
    loss_b, grad_b = run(changed)
    assert loss_a == pytest.approx(loss_b)
    assert torch.equal(grad_a, grad_b)
    assert grad_a[0, 1] == 0 and grad_a[0, 2] == 0
    assert grad_a[0, 0] != 0 and grad_a[0, 3] != 0


def test_clipping_by_hand() -> None:
    """Ratio 1.5 with A>0 is clipped to 1.2 (no gradient); ratio 0.5 with A>0 is not; with A<0 it is clipped at 0.8."""
    old = torch.zeros(1, 1)
    one = torch.ones(1, 1)

    def case(ratio: float, advantage: float) -> tuple[float, float, float]:
        logps = torch.full((1, 1), math.log(ratio), requires_grad=True)
        parts = grpo_loss(logps, old, torch.tensor([advantage]), one, clip_ratio=0.2)
        parts.loss.backward()
        return float(parts.loss), float(logps.grad), float(parts.clip_fraction)

    assert case(1.5, 1.0) == pytest.approx((-1.2, 0.0, 1.0))
    loss, grad, clipped = case(0.5, 1.0)
    assert (loss, clipped) == pytest.approx((-0.5, 0.0)) and grad == pytest.approx(-0.5)  # d(-r)/dlogp = -r
    assert case(0.5, -1.0) == pytest.approx((0.8, 0.0, 1.0))


def test_kl_is_k3_estimator_by_hand() -> None:
    """k3 = exp(ref - logp) - (ref - logp) - 1; with ref = logp + ln 2 that is 1 - ln 2, weighted by kl_coef."""
    logps = torch.tensor([[-1.0, -2.0]])
    parts = grpo_loss(logps, logps, torch.tensor([0.0]), torch.ones(1, 2), ref_logps=logps + math.log(2), kl_coef=0.5)
    assert float(parts.kl) == pytest.approx(1 - math.log(2))
    assert float(parts.loss) == pytest.approx(0.5 * (1 - math.log(2)))


def test_token_mean_weighs_tokens_sequence_mean_weighs_rollouts() -> None:
    """A 1-token rollout with loss 3 and a 3-token rollout with loss 1: token mean 1.5, sequence mean 2."""
    logps = torch.zeros(2, 3)
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]])
    adv = torch.tensor([-3.0, -1.0])  # ratio 1, so per-token loss = -A
    assert float(grpo_loss(logps, logps, adv, mask).loss) == pytest.approx(6 / 4)
    assert float(grpo_loss(logps, logps, adv, mask, aggregation="sequence_mean").loss) == pytest.approx(2.0)


def test_trl_loss_equals_ours(tiny_model_dir: Path, tmp_path: Path) -> None:
    """TRL's GRPOTrainer, configured as ``train.grpo`` configures it, computes exactly ``grpo_loss`` on one batch."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=4,
                      gradient_accumulation_steps=1, beta=0.05, epsilon=0.2, entropy_coef=0.01, loss_type="dapo",
                      use_cpu=True, report_to=[], max_steps=1, temperature=1.0)
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **_: [0.0] * len(completions), args=args,
                          train_dataset=datasets.Dataset.from_list([{"prompt": "a"}] * 4), processing_class=tokenizer)
    trainer.current_gradient_accumulation_steps = 1
    torch.manual_seed(0)
    prompt = torch.randint(3, 300, (4, 5))
    completion = torch.randint(3, 300, (4, 6))
    tool_mask = torch.tensor([[1, 1, 0, 0, 1, 1]] * 4)
    completion_mask = torch.tensor([[1] * 6, [1] * 6, [1] * 4 + [0] * 2, [1] * 6])
    current = torch.zeros(4, 6) - 5.0
    old = current + 0.3 * torch.randn_like(current)
    ref = current + 0.2 * torch.randn_like(current)
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])
    mask = completion_mask * tool_mask
    inputs = {"prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt), "completion_ids": completion,
              "completion_mask": completion_mask, "tool_mask": tool_mask, "advantages": advantages,
              "old_per_token_logps": old, "ref_per_token_logps": ref, "num_items_in_batch": mask.sum()}
    model.train()
    trl_loss = trainer._compute_loss(model, inputs)

    # Same log-probs and entropies as TRL's forward (its fused LM head differs from a plain softmax by ~1e-3).
    attention = torch.cat([inputs["prompt_mask"], completion_mask], 1)
    logps, entropies, _ = trainer._get_per_token_logps_and_entropies(
        model, torch.cat([prompt, completion], 1), attention, completion.size(1), compute_entropy=True
    )
    ours = grpo_loss(logps, old, advantages, mask, clip_ratio=0.2, ref_logps=ref, kl_coef=0.05,
                     entropies=entropies, entropy_coef=0.01)
    assert float(trl_loss) == pytest.approx(float(ours.loss), rel=1e-5, abs=1e-6)
