"""Tree attention for TRL's ``AsyncGRPOTrainer``, chosen in one place, and its MFU metric off a GPU.

TRL 1.16's asynchronous trainer packs a micro-batch's samples into a prefix trie (``packing.TreeRow``) and attends
with ``flash_attn_varlen_func`` of FlashAttention-3, which its ``packing._flash_attn`` fetches from the Hub through
the ``kernels`` package at the first forward pass: without ``kernels`` (not a dependency of ours) or without a
network, training stops there. :func:`install_tree_attention` registers under TRL's attention name the first of:

* ``fa3``: FlashAttention-3 through ``kernels``, when ``kernels`` imports and the kernel is already in its local
  cache. It is loaded with the Hub client offline (``huggingface_hub.constants.HF_HUB_OFFLINE``, which ``kernels``
  reads to resolve ``version=1`` from the cache, and which makes every Hub request raise), so nothing downloads;
* ``flash-attn``: ``flash_attn_varlen_func`` of the installed ``flash-attn`` package;
* ``sdpa``: the same attention with ``scaled_dot_product_attention``, one trie segment at a time (any device).

Both flash kernels run on a CUDA GPU in half precision only (``train.bf16``: TRL casts queries, keys and values to
the autocast dtype, which is float32 without it); elsewhere the choice is ``sdpa``. All three go through one
wrapper (:func:`varlen_tree_attention`), so the SDPA path, checked against a plain forward pass on the CPU
(``tests/train/test_async_grpo.py``), checks the plumbing the flash kernels share.

TRL's constructor also asks ``torch.cuda.get_device_name`` for the peak FLOPs of its MFU metric;
:func:`unknown_peak_flops_on_cpu` makes that "unknown" (TRL's own ``None``: MFU not logged) for a trainer on the CPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

logger = logging.getLogger(__name__)

VarlenAttention = Callable[..., Any]
"""``flash_attn_varlen_func``'s signature: (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *,
softmax_scale, causal, window_size, softcap) on (tokens, heads, dim) tensors."""


@dataclass(frozen=True)
class TreeAttention:
    """One choice of tree attention: its name (``fa3``, ``flash-attn``, ``sdpa``), why, and its varlen kernel."""

    name: str
    reason: str
    varlen: VarlenAttention


_installed: TreeAttention | None = None
_peak_flops_patched = False


def sdpa_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int, max_seqlen_k: int, *, softmax_scale: float | None = None, causal: bool = False,
    window_size: tuple[int, int] = (-1, -1), softcap: float = 0.0,
) -> torch.Tensor:
    """``flash_attn_varlen_func`` computed with SDPA, one segment at a time: segment ``s``'s queries
    ``q[cu_q[s]:cu_q[s+1]]`` attend to ``k``/``v[cu_k[s]:cu_k[s+1]]``, causally aligned bottom-right as FlashAttention
    aligns more keys than queries (a trie segment's keys are its whole root-to-segment path)."""
    if window_size != (-1, -1) or softcap:
        raise NotImplementedError("tree attention with SDPA supports neither sliding windows nor soft-capping; "
                                  "install flash-attn (or FlashAttention-3 through `kernels`) and train on a GPU.")
    repeat = q.size(1) // k.size(1)  # grouped-query attention: each key head serves `repeat` query heads
    cu_q, cu_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    out = []
    for s in range(len(cu_q) - 1):
        qs = q[cu_q[s] : cu_q[s + 1]].transpose(0, 1)
        ks = k[cu_k[s] : cu_k[s + 1]].transpose(0, 1).repeat_interleave(repeat, 0)
        vs = v[cu_k[s] : cu_k[s + 1]].transpose(0, 1).repeat_interleave(repeat, 0)
        lq, lk = qs.size(1), ks.size(1)
        mask = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(lk - lq) if causal else None
        out.append(torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, scale=softmax_scale)
                   .transpose(0, 1))
    return torch.cat(out)


def varlen_tree_attention(varlen: VarlenAttention) -> Callable[..., tuple[torch.Tensor, None]]:
    """TRL's ``tree_attention`` (``packing.py``) over ``varlen``: each trie segment's queries attend causally to the
    keys and values of its root-to-segment path, gathered by ``tree_kv_index``. Queries, keys and values are cast
    to the dtype FlashAttention needs (``get_target_dtype``: the autocast dtype of a float32 forward), as TRL does."""

    def attention(
        module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: Any, *,
        tree_kv_index: torch.Tensor, tree_cu_seqlens_q: torch.Tensor, tree_cu_seqlens_k: torch.Tensor,
        tree_max_seqlen_q: int, tree_max_seqlen_k: int, scaling: float | None = None,
        sliding_window: int | None = None, softcap: float | None = None, **kwargs: Any,
    ) -> tuple[torch.Tensor, None]:
        from transformers.integrations.flash_attention import get_target_dtype

        dtype = get_target_dtype(query, module) or query.dtype
        q, k, v = (x.transpose(1, 2)[0].to(dtype) for x in (query, key, value))  # (tokens, heads, dim)
        out = varlen(
            q, k.index_select(0, tree_kv_index), v.index_select(0, tree_kv_index), tree_cu_seqlens_q,
            tree_cu_seqlens_k, tree_max_seqlen_q, tree_max_seqlen_k, softmax_scale=scaling, causal=True,
            window_size=(sliding_window - 1, 0) if sliding_window else (-1, -1),
            **({"softcap": softcap} if softcap else {}),
        )
        out = out[0] if isinstance(out, tuple) else out
        return out.unsqueeze(0), None

    return attention


def _fa3_repo() -> tuple[str, int]:
    """The kernel repository and major version TRL's ``packing._flash_attn`` asks ``kernels`` for."""
    return ("kernels-community/aiter-flash-attn", 2) if torch.version.hip else ("kernels-community/flash-attn3", 1)


@contextmanager
def _hub_offline() -> Iterator[None]:
    """The Hugging Face Hub client offline for a while: every request raises, and ``kernels`` resolves kernel
    versions from its local cache (what ``HF_HUB_OFFLINE=1`` does, set for this block only)."""
    from huggingface_hub import constants

    before = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = before


def _cached_fa3() -> tuple[VarlenAttention | None, str]:
    """FlashAttention-3's varlen kernel from the local ``kernels`` cache, never downloaded; else None and why not."""
    try:
        from kernels import get_kernel
    except ImportError:
        return None, "`kernels` is not installed"
    repo, version = _fa3_repo()
    try:
        with _hub_offline():
            kernel = get_kernel(repo, version=version)
    except Exception as exc:  # noqa: BLE001 - not cached, or a `kernels` that cannot load offline: not this one
        return None, f"{repo} v{version} is not in the local kernels cache ({type(exc).__name__}: {exc})"
    varlen = getattr(kernel, "flash_attn_varlen_func", None)
    return varlen, "" if varlen is not None else f"{repo} has no flash_attn_varlen_func"


def _flash_attn() -> tuple[VarlenAttention | None, str]:
    """``flash_attn_varlen_func`` of the installed ``flash-attn`` package; else None and why not."""
    try:
        from flash_attn import flash_attn_varlen_func
    except ImportError as exc:  # absent, or built against another torch (an undefined symbol)
        return None, f"flash-attn does not import ({exc})"
    return flash_attn_varlen_func, ""


def choose_tree_attention(*, on_gpu: bool, half_precision: bool) -> TreeAttention:
    """The tree attention this process trains with: FlashAttention-3 from the local ``kernels`` cache, else
    flash-attn, else SDPA. The flash kernels need a CUDA GPU and half precision; nothing is downloaded."""
    if not on_gpu:
        return TreeAttention("sdpa", "the trainer runs on the CPU", sdpa_varlen)
    if not half_precision:
        return TreeAttention("sdpa", "FlashAttention needs half precision (set train.bf16=true)", sdpa_varlen)
    fa3, why_not_fa3 = _cached_fa3()
    if fa3 is not None:
        return TreeAttention("fa3", "FlashAttention-3 from the local kernels cache", fa3)
    flash, why_not_flash = _flash_attn()
    if flash is not None:
        return TreeAttention("flash-attn", f"flash-attn's varlen kernel ({why_not_fa3})", flash)
    return TreeAttention("sdpa", f"{why_not_fa3}; {why_not_flash}", sdpa_varlen)


def install_tree_attention(*, half_precision: bool) -> TreeAttention:
    """Register the chosen tree attention (:func:`choose_tree_attention` on this process's device) under TRL's
    name, with TRL's mask function; log it and keep it (:func:`installed_tree_attention`). ``AsyncGRPOTrainer``'s
    constructor registers TRL's own (FA3 from the Hub) under the same name, and the registry is read at every
    forward pass, so a trainer calls this after construction."""
    global _installed
    from transformers import AttentionInterface
    from trl.experimental.async_grpo.packing import TREE_ATTENTION, register_tree_attention

    from deepresearcher.inference import device

    choice = choose_tree_attention(on_gpu=device.on_gpu(), half_precision=half_precision)
    register_tree_attention()
    AttentionInterface.register(TREE_ATTENTION, varlen_tree_attention(choice.varlen))
    logger.info("train.async_grpo: tree attention %s (%s)", choice.name, choice.reason)
    _installed = choice
    return choice


def installed_tree_attention() -> str | None:
    """The name of the tree attention installed in this process (None before :func:`install_tree_attention`)."""
    return _installed.name if _installed is not None else None


def unknown_peak_flops_on_cpu() -> None:
    """Make TRL's peak-FLOPs lookup (for its MFU metric) answer None for a trainer on the CPU, where it would ask
    ``torch.cuda.get_device_name``; on a GPU TRL's own lookup answers. Idempotent."""
    global _peak_flops_patched
    if _peak_flops_patched:
        return
    import trl.experimental.async_grpo.async_grpo_trainer as trainer_module

    gpu_peak = trainer_module.get_peak_flops_per_device

    def peak_flops(accelerator: Any, dtype: str) -> float | None:
        return None if accelerator.device.type == "cpu" else gpu_peak(accelerator, dtype)

    trainer_module.get_peak_flops_per_device = peak_flops
    _peak_flops_patched = True


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
