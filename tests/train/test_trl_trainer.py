"""The padding-free GRPO trainer computes exactly TRL's log-probabilities and gradients, on fewer columns,
and in the loss only where the policy wrote the token."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from trl import GRPOTrainer
from trl.trainer.utils import add_fused_lm_head

from deepresearcher.train.output_layer import projects_plainly
from deepresearcher.train.trl_trainer import (
    LengthGroupedGRPOTrainer,
    length_sorted_micro_batches,
)

torch.set_num_threads(1)


def _padded_batch(vocab: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Left-padded prompts + right-padded completions of very different lengths, as TRL builds them."""
    g = torch.Generator().manual_seed(seed)
    prompt_lens, completion_lens = [5, 7, 6, 7, 4, 7], [3, 40, 5, 38, 2, 9]
    width_p, width_c = max(prompt_lens), max(completion_lens)
    ids = torch.randint(3, vocab, (6, width_p + width_c), generator=g)
    mask = torch.zeros_like(ids)
    for row, (p, c) in enumerate(zip(prompt_lens, completion_lens)):
        mask[row, width_p - p : width_p + c] = 1
    return ids.masked_fill(mask == 0, 0), mask, width_c


def _bare(cls: type, bf16: bool = False) -> GRPOTrainer:
    trainer = object.__new__(cls)
    AcceleratorState._reset_state(reset_partial_state=True)  # one state per process: each test sets its own
    trainer.accelerator = Accelerator(cpu=True, mixed_precision="bf16" if bf16 else "no")
    trainer.args = SimpleNamespace(bf16=bf16)
    trainer.temperature = 0.7
    return trainer


def _policy(tiny_model_dir: Path) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))  # what GRPOTrainer does to the policy
    return model


@pytest.mark.parametrize("batch_size", [None, 2, 4])
def test_logprobs_entropies_and_gradients_equal_trls(tiny_model_dir: Path, batch_size: int | None) -> None:
    model = _policy(tiny_model_dir)
    ids, mask, width_c = _padded_batch(model.config.vocab_size)
    completion_mask = mask[:, -width_c:].float()
    results = []
    for cls in (GRPOTrainer, LengthGroupedGRPOTrainer):
        model.zero_grad()
        logps, entropies, _ = _bare(cls)._get_per_token_logps_and_entropies(
            model, ids, mask, width_c, batch_size=batch_size, compute_entropy=True)
        (logps * completion_mask).sum().backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        results.append((logps.detach() * completion_mask, entropies.detach() * completion_mask, grads))
    (trl_lp, trl_ent, trl_grad), (our_lp, our_ent, our_grad) = results
    assert our_lp.shape == trl_lp.shape == (6, width_c)
    torch.testing.assert_close(our_lp, trl_lp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(our_ent, trl_ent, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(our_grad, trl_grad, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("batch_size", [None, 4])
def test_loss_scores_only_policy_tokens_and_matches_trl_there(tiny_model_dir: Path, batch_size: int | None) -> None:
    """With the env mask stashed by ``_compute_loss``, tool-output positions get 0 (and no gradient), and the
    policy's positions get exactly TRL's log-probabilities, entropies and gradients."""
    model = _policy(tiny_model_dir)
    ids, mask, width_c = _padded_batch(model.config.vocab_size, seed=1)
    completion_mask = mask[:, -width_c:]
    env = torch.zeros_like(completion_mask)
    env[:, 1:4] = 1  # a tool observation after the first policy token of every row
    env *= completion_mask
    scored = completion_mask * (1 - env)
    results = []
    for cls, stash in ((GRPOTrainer, None), (LengthGroupedGRPOTrainer, scored)):
        trainer = _bare(cls)
        trainer._scored_mask = stash
        model.zero_grad()
        logps, entropies, _ = trainer._get_per_token_logps_and_entropies(
            model, ids, mask, width_c, batch_size=batch_size, compute_entropy=True)
        ((logps + entropies) * scored).sum().backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        results.append((logps.detach(), entropies.detach(), grads))
    (trl_lp, trl_ent, trl_grad), (our_lp, our_ent, our_grad) = results
    assert int(scored.sum()) < int(completion_mask.sum())
    assert bool((our_lp[scored == 0] == 0).all()) and bool((our_ent[scored == 0] == 0).all())
    assert bool((trl_lp[env == 1] != 0).all())  # TRL scored the tool output
    torch.testing.assert_close(our_lp * scored, trl_lp * scored, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(our_ent * scored, trl_ent * scored, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(our_grad, trl_grad, atol=1e-5, rtol=1e-4)


def test_compute_loss_stashes_the_policy_token_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL's loss runs with the completion mask times the env mask stashed, and it is cleared afterwards."""
    seen = []
    monkeypatch.setattr(GRPOTrainer, "_compute_loss", lambda self, model, inputs: seen.append(self._scored_mask))
    trainer = _bare(LengthGroupedGRPOTrainer)
    inputs = {"completion_mask": torch.tensor([[1, 1, 1, 0]]), "tool_mask": torch.tensor([[1, 0, 1, 1]])}
    trainer._compute_loss(None, inputs)
    assert seen[0].tolist() == [[1, 0, 1, 0]]
    assert trainer._scored_mask is None


def test_micro_batches_group_similar_lengths_and_keep_rows_whole() -> None:
    lengths = torch.tensor([3, 40, 5, 38, 2, 9, 30, 1])
    batch = {
        "prompt_mask": torch.ones(8, 2, dtype=torch.long),
        "completion_mask": (torch.arange(40).unsqueeze(0) < lengths.unsqueeze(1)).long(),
        "advantages": lengths.float(),  # rides along: each row keeps its own advantage
        "ids": [f"row{i}" for i in range(8)],
        "num_items_in_batch": torch.tensor(128),
    }
    chunks = length_sorted_micro_batches(batch, 4)
    assert [c["completion_mask"].sum(1).tolist() for c in chunks] == [[40, 38], [30, 9], [5, 3], [2, 1]]
    for chunk in chunks:
        assert chunk["advantages"].tolist() == chunk["completion_mask"].sum(1).float().tolist()
        assert [int(r[3:]) for r in chunk["ids"]] == [lengths.tolist().index(int(a)) for a in chunk["advantages"]]
        assert int(chunk["num_items_in_batch"]) == 128


def test_models_the_cpu_path_cannot_score_keep_trls_fused_head(tiny_model_dir: Path) -> None:
    """Soft-capped or scaled logits, and PEFT wrappers, go through TRL's fused head; a plain model does not."""
    model = _policy(tiny_model_dir)
    assert projects_plainly(model)
    model.config.final_logit_softcapping = 30.0
    assert not projects_plainly(model)
    model.config.final_logit_softcapping = None
    model.peft_config = {"default": object()}
    assert not projects_plainly(model)


def test_bf16_on_the_cpu_pads_forward_passes_to_few_widths(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under bf16 on the CPU every forward pass is padded to a multiple of BF16_WIDTH_MULTIPLE columns (oneDNN
    builds a kernel per shape), and the padding changes no log-probability."""
    from deepresearcher.train import output_layer
    from deepresearcher.train.precision import BF16_WIDTH_MULTIPLE

    model = _policy(tiny_model_dir)
    ids, mask, width_c = _padded_batch(model.config.vocab_size)
    wide = torch.cat([ids, torch.zeros(6, 80, dtype=ids.dtype)], 1)  # room for the rounding, as a long step has
    wide_mask = torch.cat([mask, torch.zeros(6, 80, dtype=mask.dtype)], 1)
    completion_mask = wide_mask[:, -(width_c + 80):].float()
    widths: list[int] = []
    hook = model.get_input_embeddings().register_forward_hook(lambda _m, args, _out: widths.append(args[0].size(1)))
    results = []
    for rounding in (output_layer.bf16_width, lambda width: width):
        monkeypatch.setattr(output_layer, "bf16_width", rounding)
        widths.clear()
        logps, _, _ = _bare(LengthGroupedGRPOTrainer, bf16=True)._get_per_token_logps_and_entropies(
            model, wide, wide_mask, width_c + 80, batch_size=2)
        results.append((logps * completion_mask, list(widths)))
    hook.remove()
    (padded, padded_widths), (unpadded, unpadded_widths) = results
    assert all(w % BF16_WIDTH_MULTIPLE == 0 for w in padded_widths)
    assert any(w % BF16_WIDTH_MULTIPLE for w in unpadded_widths)
    torch.testing.assert_close(padded, unpadded, atol=2e-2, rtol=0)
