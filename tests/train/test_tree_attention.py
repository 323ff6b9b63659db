"""Which tree attention the asynchronous trainer attends its packed trie with, and that each attends correctly.

Real parts: a tiny model, TRL's trie packing (``TreeRow``) and attention registry, the Hub client's offline switch.
The GPU-only pieces are stood in for: ``kernels`` and ``flash_attn`` as modules whose varlen kernel is our SDPA
one (FlashAttention's contract, on the CPU), and ``device.on_gpu`` where a test asks what a GPU would get.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from deepresearcher.inference import device
from deepresearcher.train import tree_attention
from deepresearcher.train.tree_attention import choose_tree_attention, install_tree_attention, sdpa_varlen

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
torch.set_num_threads(1)
SAMPLES = [[3, 17, 40, 41, 42, 43], [3, 17, 40, 55, 56]]  # two samples sharing a three-token prefix


def _packed() -> dict[str, Any]:
    from trl.experimental.async_grpo.packing import TreeRow

    row = TreeRow()
    for ids in SAMPLES:
        row.add({"input_ids": torch.tensor(ids), "completion_mask": torch.tensor([0, 0, 1] + [1] * (len(ids) - 3)),
                 "old_log_probs": torch.zeros(len(ids)), "advantage": 0.0, "group_id": 0})
    return row.pack()


def _tree_logprobs(model_dir: Path, *, grad: bool = False) -> torch.Tensor:
    """The trained tokens' log-probabilities from one packed forward pass with the registered tree attention."""
    from transformers import AutoModelForCausalLM
    from trl.experimental.async_grpo.packing import TREE_ATTENTION

    tree = AutoModelForCausalLM.from_pretrained(str(model_dir), attn_implementation=TREE_ATTENTION)
    packed = _packed()
    kv = {"tree_kv_index": packed["tree_kv_index"], "tree_cu_seqlens_q": packed["tree_cu_seqlens_q"],
          "tree_cu_seqlens_k": packed["tree_cu_seqlens_k"],
          "tree_max_seqlen_q": int(packed["tree_max_seqlens"][0]), "tree_max_seqlen_k": int(packed["tree_max_seqlens"][1])}
    with torch.set_grad_enabled(grad):
        logits = tree(input_ids=packed["input_ids"][None], position_ids=packed["position_ids"][None], **kv).logits[0]
    assert len(packed["input_ids"]) < sum(map(len, SAMPLES))  # the shared prefix was forwarded once
    return logits.log_softmax(-1)[packed["token_index"], packed["shift_labels"][packed["token_index"]]]


def _plain_logprobs(model_dir: Path) -> torch.Tensor:
    """The same tokens' log-probabilities from a plain forward pass of each sample on its own."""
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    want = []
    with torch.no_grad():
        for ids in SAMPLES:
            lp = plain(input_ids=torch.tensor([ids])).logits[0].log_softmax(-1)
            want += [lp[p - 1, ids[p]] for p in range(2, len(ids))]
    return torch.stack(want)


class _Kernels:
    """A stand-in ``kernels`` package with ``kernels``' offline contract: with the Hub client offline it loads a
    kernel from its cache (``cached``) or raises; online it would download (recorded, so a test can forbid it)."""

    def __init__(self, cached: bool) -> None:
        self.cached = cached
        self.calls: list[tuple[str, int, bool]] = []
        self.varlen_calls = 0

    def module(self) -> types.ModuleType:
        module = types.ModuleType("kernels")
        module.get_kernel = self.get_kernel  # type: ignore[attr-defined]
        return module

    def get_kernel(self, repo_id: str, version: int) -> types.ModuleType:
        from huggingface_hub import constants

        self.calls.append((repo_id, version, constants.HF_HUB_OFFLINE))
        if constants.HF_HUB_OFFLINE and not self.cached:
            raise FileNotFoundError(f"Cannot find a local snapshot for {repo_id}")
        kernel = types.ModuleType("flash_attn3")

        def flash_attn_varlen_func(*args: Any, **kwargs: Any) -> torch.Tensor:
            self.varlen_calls += 1
            return sdpa_varlen(*args, **kwargs)

        kernel.flash_attn_varlen_func = flash_attn_varlen_func  # type: ignore[attr-defined]
        return kernel


@pytest.fixture(autouse=True)
def _sdpa_after() -> Any:
    """Each test leaves the CPU's own choice registered, whatever stand-in kernel it installed."""
    yield
    install_tree_attention(half_precision=False)


def _without(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)  # `import name` raises ImportError


def test_sdpa_tree_attention_matches_a_plain_forward(tiny_model_dir: Path) -> None:
    """On the CPU the choice is SDPA; two samples sharing a prefix, packed into TRL's trie, get the
    log-probabilities each gets from its own plain forward pass."""
    choice = install_tree_attention(half_precision=False)
    assert choice.name == "sdpa" and tree_attention.installed_tree_attention() == "sdpa"
    torch.testing.assert_close(_tree_logprobs(tiny_model_dir), _plain_logprobs(tiny_model_dir), rtol=1e-5, atol=1e-5)


def test_without_kernels_a_gpu_gets_sdpa_and_a_training_forward_works(tiny_model_dir: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """What stopped TRL at the first forward pass (``No module named 'kernels'``): with neither ``kernels`` nor
    flash-attn importable, even a bf16 GPU run gets SDPA, and a packed forward and backward pass run."""
    _without(monkeypatch, "kernels", "flash_attn")
    monkeypatch.setattr(device, "on_gpu", lambda: True)
    choice = install_tree_attention(half_precision=True)
    assert choice.name == "sdpa" and "`kernels` is not installed" in choice.reason
    logprobs = _tree_logprobs(tiny_model_dir, grad=True)
    logprobs.sum().backward()
    assert torch.isfinite(logprobs).all()
    torch.testing.assert_close(logprobs.detach(), _plain_logprobs(tiny_model_dir), rtol=1e-5, atol=1e-5)


def test_kernels_without_a_cached_kernel_is_not_fa3_and_nothing_is_downloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    kernels = _Kernels(cached=False)
    monkeypatch.setitem(sys.modules, "kernels", kernels.module())
    _without(monkeypatch, "flash_attn")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    choice = choose_tree_attention(on_gpu=True, half_precision=True)
    assert choice.name == "sdpa" and "not in the local kernels cache" in choice.reason
    assert kernels.calls == [("kernels-community/flash-attn3", 1, True)], "the kernel was looked up online"
    assert constants.HF_HUB_OFFLINE is False, "the Hub client must be back online after the lookup"


def test_a_cached_fa3_kernel_is_chosen_and_attends_like_a_plain_forward(tiny_model_dir: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """FlashAttention-3 from the cache comes first, even beside flash-attn; TRL's packed inputs reach its varlen
    kernel in FlashAttention's argument order (a kernel with its semantics gives the plain forward's numbers)."""
    kernels = _Kernels(cached=True)
    monkeypatch.setitem(sys.modules, "kernels", kernels.module())
    monkeypatch.setitem(sys.modules, "flash_attn", types.ModuleType("flash_attn"))
    monkeypatch.setattr(device, "on_gpu", lambda: True)
    choice = install_tree_attention(half_precision=True)
    assert choice.name == "fa3" and tree_attention.installed_tree_attention() == "fa3"
    assert [offline for _, _, offline in kernels.calls] == [True]
    torch.testing.assert_close(_tree_logprobs(tiny_model_dir), _plain_logprobs(tiny_model_dir), rtol=1e-5, atol=1e-5)
    assert kernels.varlen_calls == 2, "each of the tiny model's two layers attends through the kernel"


def test_flash_attn_needs_a_gpu_and_half_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    flash = types.ModuleType("flash_attn")
    flash.flash_attn_varlen_func = sdpa_varlen  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flash_attn", flash)
    _without(monkeypatch, "kernels")
    assert choose_tree_attention(on_gpu=False, half_precision=True).name == "sdpa"
    assert choose_tree_attention(on_gpu=True, half_precision=False).name == "sdpa"
    on_gpu = choose_tree_attention(on_gpu=True, half_precision=True)
    assert on_gpu.name == "flash-attn" and on_gpu.varlen is sdpa_varlen
