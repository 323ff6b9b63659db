"""Muon with its Newton-Schulz iteration in the gradients' own precision.

``torch.optim.Muon`` orthogonalizes each update in bfloat16, as its reference implementation does on a
GPU. A CPU without native bfloat16 matrix units pays dearly for that: on the quickstart's 0.85M-parameter
model its step took ~1 s on one thread, more than the forward and backward passes, against ~0.05 s
here in fp32. The algorithm and its defaults are torch's (momentum 0.95, Nesterov, the quintic coefficients,
5 steps, the learning rate scaled by ``sqrt(max(1, rows / cols))``, decoupled weight decay).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

NS_COEFFICIENTS = (3.4445, -4.775, 2.0315)


def orthogonalize(update: torch.Tensor, steps: int = 5, eps: float = 1e-7) -> torch.Tensor:
    """An approximately orthogonal matrix with ``update``'s singular vectors (the quintic Newton-Schulz
    iteration of Muon), computed in ``update``'s dtype."""
    a, b, c = NS_COEFFICIENTS
    wide = update.size(0) <= update.size(1)
    x = update if wide else update.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x if wide else x.T


class Muon(torch.optim.Optimizer):
    """Momentum, orthogonalized: for the 2-D weight matrices of hidden layers only."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float = 0.02, momentum: float = 0.95,
                 weight_decay: float = 0.0, nesterov: bool = True, ns_steps: int = 5) -> None:
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov,
                                      ns_steps=ns_steps))
        for group in self.param_groups:
            if any(p.ndim != 2 for p in group["params"]):
                raise ValueError("Muon optimizes 2-D weight matrices only; give embeddings, norms and biases to AdamW")

    @torch.no_grad()
    def step(self, closure: None = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(param)
                buf = state["momentum_buffer"]
                buf.lerp_(param.grad, 1 - group["momentum"])
                update = param.grad.lerp(buf, group["momentum"]) if group["nesterov"] else buf
                rows, cols = param.shape
                param.mul_(1 - group["lr"] * group["weight_decay"])
                param.add_(orthogonalize(update, group["ns_steps"]), alpha=-group["lr"] * math.sqrt(max(1, rows / cols)))
