"""bfloat16 autocast on the CPU: where it pays, and the tensor shapes that keep it fast.

On a CPU with native bf16 (AVX512-BF16, AMX, Arm BF16) oneDNN runs the quickstart's SFT and GRPO forward
and backward passes ~1.4x faster in bf16 than in fp32; without it, bf16 is emulated and slower. oneDNN
builds and caches a kernel for every new matrix shape in bf16: with episodes of every length, each step
met new widths, which cost more time than bf16 saved and grew memory by ~10 MB a step (1.65 GB -> 2.4 GB
in 40 SFT steps, still rising; 4.9 GB in a quickstart). Widths rounded up to ``BF16_WIDTH_MULTIPLE``
leave a few dozen shapes: memory stays flat and the steps are faster.
"""

from __future__ import annotations

from deepresearcher.inference import device

BF16_WIDTH_MULTIPLE = 64  # tokens; a batch's width is rounded up to this under bf16 on the CPU


def cpu_has_native_bf16() -> bool:
    """Whether oneDNN runs bfloat16 matmuls natively on this CPU (else autocast to bf16 is slower than fp32)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch build without oneDNN
        return False


def bf16_is_emulated() -> bool:
    """Whether bf16 autocast would run emulated here (models on the CPU, which has no native bf16): slower than fp32."""
    return not device.on_gpu() and not cpu_has_native_bf16()


def bf16_width(width: int) -> int:
    """``width`` rounded up to a multiple of ``BF16_WIDTH_MULTIPLE``, for bf16 on the CPU."""
    return -(-width // BF16_WIDTH_MULTIPLE) * BF16_WIDTH_MULTIPLE
