"""What every part of ``bench gpu`` shares: the part names, the model shapes, the run's sizes, the context a part
runs in, and the FLOP/s arithmetic (a helper of ``bench/gpu.py``; its leading underscore keeps it off the
benchmark list)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PART_NAMES: tuple[str, ...] = ("grpo_paper", "grpo_paper_vllm", "sft", "async_grpo", "verl", "generate")

_QWEN25 = {"max_position_embeddings": 32768, "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6, "hidden_act": "silu",
           "use_sliding_window": False, "sliding_window": 32768, "bos_token_id": 151643, "eos_token_id": 151645}
SHAPES: dict[str, dict[str, Any]] = {
    # Qwen2.5-{0.5B,1.5B,7B}-Instruct's config.json (the 7B's vocabulary is padded further and unties its head).
    "0.5b": {**_QWEN25, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
             "num_attention_heads": 14, "num_key_value_heads": 2, "max_window_layers": 21, "vocab_size": 151936,
             "tie_word_embeddings": True},
    "1.5b": {**_QWEN25, "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
             "num_attention_heads": 12, "num_key_value_heads": 2, "max_window_layers": 21, "vocab_size": 151936,
             "tie_word_embeddings": True},
    "7b": {**_QWEN25, "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
           "num_attention_heads": 28, "num_key_value_heads": 4, "max_window_layers": 28, "vocab_size": 152064,
           "tie_word_embeddings": False},
}
TINY_SHAPE: dict[str, Any] = {**_QWEN25, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "num_key_value_heads": 2, "max_window_layers": 2,
                              "vocab_size": 151936, "tie_word_embeddings": True, "max_position_embeddings": 8192}

# Run sizes: a GPU's (the 0.5B shape in about five minutes) and --tiny's (every part on 2 CPU cores in minutes).
_SIZES = {
    "gpu": {"steps": 2, "prompts": 4, "group": 8, "turns": 4, "tokens_per_turn": 256, "sft_steps": 10, "sft_batch": 8,
            "requests": "1,32,128", "new_tokens": 64, "prompt_tokens": 256},
    "tiny": {"steps": 2, "prompts": 2, "group": 2, "turns": 3, "tokens_per_turn": 24, "sft_steps": 3, "sft_batch": 2,
             "requests": "1,32,128", "new_tokens": 64, "prompt_tokens": 256},
}

# Peak dense bf16 tensor FLOP/s by device name (NVIDIA's datasheets; SXM parts unless named). Longer names
# first, so an "H100 PCIe" is not read as an SXM H100.
PEAK_BF16_FLOPS: tuple[tuple[str, float], ...] = (
    ("H100 PCIe", 756e12), ("H100 NVL", 835e12), ("GH200", 989e12), ("H200", 989e12), ("H100", 989e12),
    ("B200", 2250e12), ("A100", 312e12), ("L40S", 362e12), ("L40", 181e12), ("L4", 121e12),
    ("RTX 4090", 165e12), ("RTX 3090", 71e12), ("A6000", 155e12),
)


class Skip(Exception):
    """A part that cannot run on this machine; its message is the reason shown in place of figures."""


def defaults_for(args: argparse.Namespace) -> dict[str, Any]:
    """The run's sizes: each option given on the command line, else --tiny's or a GPU's default."""
    sizes = _SIZES["tiny" if args.tiny else "gpu"]
    return {key: getattr(args, key) if getattr(args, key) is not None else value for key, value in sizes.items()}


def peak_flops(device_name: str | None) -> float | None:
    """The card's peak dense bf16 FLOP/s, or None for a device this table does not know (and the CPU)."""
    for key, flops in PEAK_BF16_FLOPS:
        if device_name and key.lower() in device_name.lower():
            return flops
    return None


@dataclass
class PartContext:
    """What a part process knows: the run's options, the prepared checkpoint, and where to work."""

    options: dict[str, Any]
    work: Path
    model_dir: Path
    params: int
    peak_flops: float | None

    @classmethod
    def load(cls, work: Path) -> PartContext:
        setup = json.loads((work / "results" / "setup.json").read_text(encoding="utf-8"))
        return cls(json.loads((work / "args.json").read_text(encoding="utf-8")), work, Path(setup["model"]["path"]),
                   setup["model"]["params"], setup["machine"]["peak_bf16_flops"])

    @property
    def tiny(self) -> bool:
        return bool(self.options["tiny"])

    def update_figures(self, tokens: float, seconds: float) -> dict[str, Any]:
        """Achieved model FLOP/s of an update (6 x params x trained tokens / seconds) and the MFU it makes."""
        flops = 6 * self.params * tokens / seconds if seconds > 0 else None
        return {"trained_tokens": int(tokens), "update_tflops": round(flops / 1e12, 3) if flops else None,
                "mfu": round(flops / self.peak_flops, 4) if flops and self.peak_flops else None}
