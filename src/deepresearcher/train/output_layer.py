"""Logits at chosen positions only: the output layer applied where a loss reads it.

A loss reads the logits of some positions (SFT: tokens with a weight; GRPO: tokens the policy wrote).
Projecting every position onto the vocabulary, with its log-softmax and the copies of the full logits
tensor, was ~45% of a tiny model's step on the CPU; SFT and the GRPO trainer share this instead.
"""

from __future__ import annotations

from typing import Any

import torch

from deepresearcher.train.precision import bf16_width

# Config fields of architectures that transform logits after the output layer (Gemma 2's soft-capping,
# Cohere's, Falcon-H1's and Granite's scaling).
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling")


def projects_plainly(model: Any) -> bool:
    """Whether ``model``'s logits are its output layer applied to its backbone's last hidden state: not for
    architectures that transform them afterwards, nor for PEFT wrappers (whose ``base_model`` is not the
    backbone)."""
    config = model.config.get_text_config()
    return not hasattr(model, "peft_config") and all(getattr(config, name, None) is None for name in _LOGIT_TRANSFORMS)


def right_padded(attention_mask: Any) -> bool:
    """Whether every row of ``attention_mask`` is ones then zeros (no padding before a real token)."""
    return bool((attention_mask[:, :-1] >= attention_mask[:, 1:]).all())


def next_token_logits(model: Any, input_ids: Any, attention_mask: Any, where: Any) -> Any:
    """``[n, vocab]`` logits predicting token ``t+1`` at each position ``t`` where ``where`` (``[rows, len-1]``,
    bool) is set, row by row; only those positions go through the output layer when the model allows it.

    Under bf16 autocast on the CPU the batch gets padding columns and the output layer padding rows, up to
    multiples of ``BF16_WIDTH_MULTIPLE`` (oneDNN builds a kernel per shape; see ``train.precision``); the
    padding is masked out and cut off, so the logits are the same.

    A batch padded only on the right (SFT's) goes without its mask: causal attention already keeps every
    real position from seeing the padding after it, and without a mask sdpa skips the half of the scores
    above the diagonal (an explicit mask makes it compute them all).
    """
    width = input_ids.size(1)
    if right_padded(attention_mask):
        attention_mask = None
    few_shapes = input_ids.device.type == "cpu" and torch.is_autocast_enabled("cpu")
    if few_shapes:
        extra = bf16_width(width) - width
        input_ids = torch.nn.functional.pad(input_ids, (0, extra))
        if attention_mask is not None:
            attention_mask = torch.nn.functional.pad(attention_mask, (0, extra))
    if not projects_plainly(model):
        return model(input_ids=input_ids, attention_mask=attention_mask).logits[:, : width - 1][where]
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    chosen = hidden[:, : width - 1][where]
    rows = chosen.size(0)
    if few_shapes:
        chosen = torch.nn.functional.pad(chosen, (0, 0, 0, bf16_width(rows) - rows))
    return model.get_output_embeddings()(chosen)[:rows]
