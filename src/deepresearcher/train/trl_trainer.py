"""TRL's ``GRPOTrainer`` without the compute it spends on padding.

Agent episodes differ a lot in length (a one-hop episode is a third of a three-hop one), and TRL pads a
whole step's rollouts to the longest before it splits them into micro-batches in random order, so most
micro-batches carry the longest episode's width. This subclass changes two things and nothing else:

* micro-batches are cut from the step's rollouts sorted by length (the longest together, the shortest
  together) instead of shuffled: with the token-mean loss, whose normalizer counts the whole step's
  tokens, every micro-batch's gradient is the same whichever rows it holds, so the update is unchanged;
* every forward pass (the policy's and the reference model's) drops the completion columns that no row
  of its chunk uses, and returns log-probabilities at the original width (zeros where every row is
  padding, exactly the positions the loss masks out).

Prompts are left-padded and barely differ in length, so their padding is kept: positions then stay
exactly what TRL would use for every model, whatever its position encoding. Text only, as our
``rollout_func`` is: a forward pass with image inputs goes through TRL's own code.

In the loss, log-probabilities and entropies are computed only where the policy wrote the token (the
completion mask times the env mask; elsewhere they are 0, as the loss masks them out): tool output is
most of an agent episode, and the vocabulary projection over it was wasted. TRL's fused LM head skips
such positions only on Triton devices; on the CPU it scores every position (prompt and padding too),
which was ~44% of a quickstart step, so there the scored positions alone go through the output layer.
"""

from __future__ import annotations

from typing import Any

import torch
from trl import GRPOTrainer
from trl.trainer.utils import split_tensor_dict

from deepresearcher.train.output_layer import next_token_logits, projects_plainly
from deepresearcher.train.trl_compat import check_grpo_trainer

check_grpo_trainer(GRPOTrainer)  # a TRL that renamed what we override fails here, naming the versions we support

_VISION_INPUTS = ("pixel_values", "image_grid_thw", "pixel_attention_mask", "spatial_shapes", "image_sizes",
                  "image_position_ids", "token_type_ids", "mm_token_type_ids")


def sort_rows(batch: dict[str, Any], order: torch.Tensor) -> dict[str, Any]:
    """Every per-row value of a TRL batch (tensors and lists of the batch's length) in ``order``."""
    rows = len(order)

    def take(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.ndim >= 1 and value.shape[0] == rows:
            return value[order.to(value.device)]
        if isinstance(value, list) and len(value) == rows:
            return [value[i] for i in order.tolist()]
        return value

    return {key: take(value) for key, value in batch.items()}


def length_sorted_micro_batches(batch: dict[str, Any], chunks: int) -> list[dict[str, Any]]:
    """``batch`` split into ``chunks`` micro-batches of rows of similar length, longest first."""
    lengths = batch["prompt_mask"].sum(1) + batch["completion_mask"].sum(1)
    return split_tensor_dict(sort_rows(batch, torch.argsort(lengths, descending=True, stable=True)), chunks)


class LengthGroupedGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose micro-batches group similar lengths, whose forward passes skip padding, and whose
    loss scores only the tokens the policy wrote."""

    def _prepare_inputs(self, generation_batch: dict[str, Any]) -> dict[str, Any]:
        if not self.model.training:
            return super()._prepare_inputs(generation_batch)
        if self._step % (self.args.steps_per_generation * self.num_iterations) == 0 or self._buffered_inputs is None:
            scored = self._generate_and_score_completions(generation_batch)
            self._buffered_inputs = length_sorted_micro_batches(scored, self.args.steps_per_generation)
        return self._buffered_inputs[self._step % self.args.steps_per_generation]

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        mask = inputs["completion_mask"]
        self._scored_mask = mask * inputs["tool_mask"] if "tool_mask" in inputs else mask
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._scored_mask = None

    def _get_per_token_logps_and_entropies(
        self, model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
        batch_size: int | None = None, compute_entropy: bool = False, compute_aux_loss: bool = False, **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        if any(kwargs.get(k) is not None for k in (*_VISION_INPUTS, "num_images", "num_tiles")):
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss, **kwargs)
        rows, size = input_ids.size(0), batch_size or input_ids.size(0)
        prompt_width = input_ids.size(1) - logits_to_keep
        scored = getattr(self, "_scored_mask", None)  # set only inside the loss
        if scored is None:
            scored = attention_mask[:, prompt_width:]
        order = torch.argsort(attention_mask[:, prompt_width:].sum(1), descending=True, stable=True)
        logps: torch.Tensor | None = None
        entropies: torch.Tensor | None = None
        aux_losses = []
        for start in range(0, rows, size):
            chunk = order[start : start + size].to(input_ids.device)
            used = attention_mask[chunk, prompt_width:].any(0).nonzero()
            keep = int(used[-1]) + 1 if len(used) else 1
            chunk_logps, chunk_entropies, aux = self._score_chunk(
                model, input_ids[chunk, : prompt_width + keep], attention_mask[chunk, : prompt_width + keep],
                scored[chunk, :keep], compute_entropy, compute_aux_loss)
            if logps is None:
                logps = chunk_logps.new_zeros(rows, logits_to_keep)
                entropies = chunk_logps.new_zeros(rows, logits_to_keep) if compute_entropy else None
            logps = logps.index_put((chunk,), _widen(chunk_logps, logits_to_keep))
            if entropies is not None and chunk_entropies is not None:
                entropies = entropies.index_put((chunk,), _widen(chunk_entropies, logits_to_keep))
            if aux is not None:
                aux_losses.append(aux)
        assert logps is not None
        return logps, entropies, torch.stack(aux_losses).mean() if aux_losses else None

    def _score_chunk(
        self, model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, scored: torch.Tensor,
        compute_entropy: bool, compute_aux_loss: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Log-probabilities (and entropies) of the last ``scored.size(1)`` tokens of each row, 0 where not scored."""
        keep = scored.size(1)
        labels = input_ids.masked_fill(attention_mask == 0, -100)
        labels[:, :-keep] = -100
        labels[:, -keep:] = labels[:, -keep:].masked_fill(scored == 0, -100)
        if input_ids.device.type != "cpu" or compute_aux_loss or not projects_plainly(model):
            extra = {"output_router_logits": True} if compute_aux_loss else {}
            with self.accelerator.autocast():
                out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, fused_lm_head=True, **extra)
            return (out.log_probs[:, -keep:], out.entropy[:, -keep:] if compute_entropy else None,
                    out.aux_loss if compute_aux_loss else None)
        targets = labels[:, 1:]
        where = targets != -100
        with self.accelerator.autocast():
            logits = next_token_logits(model, input_ids, attention_mask, where)
        logp_all = (logits.float() / self.temperature).log_softmax(-1)
        picked = logp_all.gather(-1, targets[where].unsqueeze(-1)).squeeze(-1)
        logps = logp_all.new_zeros(targets.shape).masked_scatter(where, picked)[:, -keep:]
        entropies = None
        if compute_entropy:
            entropy = -(logp_all.exp() * logp_all).sum(-1)
            entropies = logp_all.new_zeros(targets.shape).masked_scatter(where, entropy)[:, -keep:]
        return logps, entropies, None


def _widen(values: torch.Tensor, width: int) -> torch.Tensor:
    """``values`` right-padded with zeros to ``width`` columns (differentiable)."""
    return torch.nn.functional.pad(values, (0, width - values.size(1)))

