"""The fp32 Muon: torch's algorithm, step for step, without its bfloat16 cast."""

from __future__ import annotations

import pytest
import torch

from deepresearcher.warmstart.muon import Muon, orthogonalize

torch.set_num_threads(1)


@pytest.mark.parametrize("shape", [(32, 64), (64, 32)])
def test_orthogonalize_flattens_the_singular_values(shape: tuple[int, int]) -> None:
    """Newton-Schulz maps the singular values of any matrix near 1 (Muon's iteration: into ~[0.5, 1.5])."""
    update = torch.randn(*shape, generator=torch.Generator().manual_seed(0)) * torch.logspace(-1, 1, shape[1])
    singular = torch.linalg.svdvals(orthogonalize(update))
    assert singular.min() > 0.3 and singular.max() < 1.5
    assert torch.linalg.svdvals(update).max() / torch.linalg.svdvals(update).min() > 30


def test_steps_match_torch_muon_up_to_its_bfloat16() -> None:
    """Three steps of ours and of ``torch.optim.Muon`` from the same start and gradients agree to bf16 precision."""
    generator = torch.Generator().manual_seed(1)
    start = torch.randn(48, 24, generator=generator)
    grads = [torch.randn(48, 24, generator=generator) for _ in range(3)]
    ours, theirs = torch.nn.Parameter(start.clone()), torch.nn.Parameter(start.clone())
    ours_opt, theirs_opt = Muon([ours], lr=0.02, weight_decay=0.01), torch.optim.Muon([theirs], lr=0.02, weight_decay=0.01)
    for grad in grads:
        ours.grad, theirs.grad = grad.clone(), grad.clone()
        ours_opt.step()
        theirs_opt.step()
    moved = (theirs - start).abs().mean()
    assert moved > 1e-3
    assert (ours - theirs).abs().mean() < 0.02 * moved


def test_muon_refuses_what_is_not_a_matrix() -> None:
    with pytest.raises(ValueError, match="2-D weight matrices only"):
        Muon([torch.nn.Parameter(torch.zeros(8))])
