"""What TRL's ``AsyncGRPOTrainer`` needs to run on a CPU, and nothing more.

TRL 1.16's asynchronous trainer is GPU-only in exactly two places; everything else (the rollout queue,
the staleness rule, tree packing, the clipped loss, checkpoints) runs unchanged on the CPU:

* **Tree attention.** Its training forward packs a micro-batch's samples into a prefix trie and attends
  with ``flash_attn_varlen_func`` from the FA3 kernel it downloads from the Hub (CUDA only). On the CPU,
  :func:`tree_attention_cpu` computes the same thing per segment with ``scaled_dot_product_attention``:
  each segment's queries attend causally (bottom-right aligned, as FlashAttention's ``causal=True`` does
  when there are more keys than queries) to the keys and values of its root-to-segment path.
  ``tests/train/test_async_grpo.py`` checks the packed log-probabilities against a plain forward pass.
* **Peak FLOPs.** Its constructor asks ``torch.cuda.get_device_name`` for the MFU metrics; on the CPU the
  peak is unknown, which TRL already handles as ``None`` (MFU not logged).

:func:`enable_cpu` installs both, and only on a CPU device: on a GPU TRL's own code runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

_installed = False


def tree_attention_cpu(
    module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: Any, *,
    tree_kv_index: torch.Tensor, tree_cu_seqlens_q: torch.Tensor, tree_cu_seqlens_k: torch.Tensor,
    tree_max_seqlen_q: int, tree_max_seqlen_k: int, scaling: float | None = None,
    sliding_window: int | None = None, softcap: float | None = None, **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """TRL's ``tree_attention`` (``packing.py``) computed with SDPA, one trie segment at a time."""
    if sliding_window or softcap:
        raise NotImplementedError("tree attention on the CPU supports neither sliding windows nor soft-capping; "
                                  "train this model on a GPU.")
    q, k, v = (x.transpose(1, 2)[0] for x in (query, key, value))  # (tokens, heads, dim)
    k, v = k.index_select(0, tree_kv_index), v.index_select(0, tree_kv_index)
    repeat = q.size(1) // k.size(1)  # grouped-query attention: each key head serves `repeat` query heads
    cu_q, cu_k = tree_cu_seqlens_q.tolist(), tree_cu_seqlens_k.tolist()
    out = []
    for s in range(len(cu_q) - 1):
        qs = q[cu_q[s] : cu_q[s + 1]].transpose(0, 1)
        ks = k[cu_k[s] : cu_k[s + 1]].transpose(0, 1).repeat_interleave(repeat, 0)
        vs = v[cu_k[s] : cu_k[s + 1]].transpose(0, 1).repeat_interleave(repeat, 0)
        lq, lk = qs.size(1), ks.size(1)
        mask = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(lk - lq)
        out.append(torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, scale=scaling)
                   .transpose(0, 1))
    return torch.cat(out).unsqueeze(0), None


def enable_cpu() -> None:
    """Make ``AsyncGRPOTrainer`` constructible and trainable on the CPU (idempotent; a no-op with CUDA)."""
    global _installed
    if _installed or torch.cuda.is_available():
        return
    import trl.experimental.async_grpo.async_grpo_trainer as trainer_module
    from transformers import AttentionInterface
    from trl.experimental.async_grpo.packing import TREE_ATTENTION, register_tree_attention

    gpu_peak = trainer_module.get_peak_flops_per_device

    def peak_flops(accelerator: Any, dtype: str) -> float | None:
        return None if accelerator.device.type == "cpu" else gpu_peak(accelerator, dtype)

    trainer_module.get_peak_flops_per_device = peak_flops
    register_tree_attention()  # the trainer re-registers TRL's own at construction; see install_tree_attention
    AttentionInterface.register(TREE_ATTENTION, tree_attention_cpu)
    _installed = True


def install_tree_attention() -> None:
    """Register the CPU tree attention again: ``AsyncGRPOTrainer.__init__`` registers TRL's (FA3) under the
    same name, and the registry is read at every forward pass, so this runs after construction."""
    if torch.cuda.is_available():
        return
    from transformers import AttentionInterface
    from trl.experimental.async_grpo.packing import TREE_ATTENTION

    AttentionInterface.register(TREE_ATTENTION, tree_attention_cpu)


@contextmanager
def plain_attention(model: Any) -> Iterator[None]:
    """The trainer's model with ordinary attention for a while (the held-out evaluation decodes with it): the
    tree attention of training needs packed inputs that a decode step does not have."""
    config = model.config
    packed = config._attn_implementation
    config._attn_implementation = "sdpa"
    try:
        yield
    finally:
        config._attn_implementation = packed
