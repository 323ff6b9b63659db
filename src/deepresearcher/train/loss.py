"""The GRPO objective as pure tensor functions, written once so it can be tested by hand.

This is the loss TRL's ``GRPOTrainer`` computes with our settings (``loss_type="dapo"`` for token-mean,
``"grpo"`` for sequence-mean, ``scale_rewards="group"``, ``beta`` = KL weight, ``entropy_coef``);
``tests/train/test_loss.py`` checks both against hand-computed cases and against each other.

Shapes: ``B`` rollouts laid out group by group (``B = groups x group_size``), ``T`` completion tokens.
``mask`` is 1 exactly on tokens the policy sampled; tool observations (and padding) are 0, so they
add nothing to the loss and receive no gradient::

    completion:  <think>..</think><tool_call>..</tool_call> | <tool_response>..</tool_response> | <answer>..
    mask:        1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 | 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 | 1 1 1 1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

Aggregation = Literal["token_mean", "sequence_mean"]


def group_advantages(rewards: torch.Tensor, group_size: int, scale: bool = True, eps: float = 1e-4) -> torch.Tensor:
    """Each rollout's reward minus its group's mean, divided by the group's std (Bessel-corrected) plus ``eps``.

    A group whose rewards are all equal gets advantage 0 everywhere: it carries no signal.
    """
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    grouped = rewards.view(-1, group_size)
    advantages = grouped - grouped.mean(dim=1, keepdim=True)
    if scale:
        advantages = advantages / (grouped.std(dim=1, keepdim=True) + eps)
    return advantages.reshape(-1)


def zero_signal_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Per group of ``group_size`` consecutive rollouts, whether its rewards are all equal (advantages all zero)."""
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    grouped = rewards.view(-1, group_size)
    return (grouped.max(dim=1).values - grouped.min(dim=1).values).abs().le(1e-8)


def zero_signal_share(rewards: torch.Tensor, group_size: int) -> float:
    """Share of groups whose rewards are all equal (their advantages are all zero)."""
    return float(zero_signal_groups(rewards, group_size).float().mean())


@dataclass
class LossParts:
    """The scalar loss and the pieces it is made of, for logging."""

    loss: torch.Tensor
    policy_loss: torch.Tensor
    kl: torch.Tensor
    entropy: torch.Tensor
    clip_fraction: torch.Tensor


def grpo_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_ratio: float = 0.2,
    ref_logps: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    entropies: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
    aggregation: Aggregation = "token_mean",
    kl_importance_weighted: bool = True,
) -> LossParts:
    """Clipped-ratio policy loss plus ``kl_coef`` x k3-KL to the reference, minus ``entropy_coef`` x entropy.

    ``logps`` (B, T) carry gradient; ``old_logps`` are the sampling policy's; ``advantages`` is (B,).
    Per token: ``-min(r A, clip(r, 1-eps, 1+eps) A) + beta (exp(ref-lp) - (ref-lp) - 1)`` with
    ``r = exp(lp - old)``; with ``kl_importance_weighted`` (TRL's default) the KL term is multiplied by
    ``r``, since the tokens were sampled from the old policy. ``token_mean`` averages over every masked token of the batch; ``sequence_mean``
    averages within each rollout, then over rollouts. The entropy bonus is always a token mean.
    """
    mask = mask.to(logps.dtype)
    ratio = torch.exp(logps - old_logps)
    adv = advantages.unsqueeze(1)
    clipped = torch.clamp(ratio, 1 - clip_ratio, 1 + clip_ratio)
    per_token = -torch.min(ratio * adv, clipped * adv)
    per_token_kl = torch.zeros_like(logps)
    if ref_logps is not None and kl_coef:
        delta = ref_logps - logps
        per_token_kl = torch.exp(delta) - delta - 1
        if kl_importance_weighted:
            per_token_kl = per_token_kl * ratio
        per_token = per_token + kl_coef * per_token_kl
    tokens = mask.sum().clamp(min=1.0)
    if aggregation == "token_mean":
        loss = (per_token * mask).sum() / tokens
    else:
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    policy_loss = loss.detach()
    entropy = torch.zeros((), dtype=logps.dtype, device=logps.device)
    if entropies is not None:
        entropy = (entropies * mask).sum() / tokens
        loss = loss - entropy_coef * entropy
    was_clipped = ((ratio < 1 - clip_ratio) & (adv < 0)) | ((ratio > 1 + clip_ratio) & (adv > 0))
    return LossParts(
        loss=loss,
        policy_loss=policy_loss,
        kl=((per_token_kl * mask).sum() / tokens).detach(),
        entropy=entropy.detach(),
        clip_fraction=((was_clipped.to(mask.dtype) * mask).sum() / tokens).detach(),
    )
