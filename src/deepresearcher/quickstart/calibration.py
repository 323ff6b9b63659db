"""A figure of the machine, measured beside a run's timings: SFT tokens per second of one fixed micro-batch.

The model (the quickstart's tiny Qwen2 shape, random weights from a fixed seed), the batch (random
token ids of a fixed length, a fixed loss-weight pattern) and the number of optimizer steps never
change, and the step is the SFT step itself (``warmstart.sft.next_token_loss``, AdamW). So only the
machine changes the figure: its cores, their speed, the torch build and whatever else is running. Two
reports with the same recipe and different timings can then be told apart: a slow machine shows a
low figure, a slow recipe does not.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import asdict, dataclass
from typing import Any

# The fixed workload. Changing any of these makes old figures incomparable: bump CALIBRATION_VERSION.
CALIBRATION_VERSION = 1
_VOCAB, _HIDDEN, _LAYERS, _HEADS, _KV_HEADS, _MLP = 4096, 128, 4, 4, 2, 384
_BATCH, _SEQ_LEN, _STEPS, _WARMUP_STEPS = 16, 512, 2, 1  # ~5 s on an idle 2-core VM


@dataclass(frozen=True)
class Calibration:
    """SFT tokens/s of the fixed micro-batch, and what the machine is."""

    sft_tokens_per_second: float
    seconds: float
    torch_threads: int
    cpu_count: int | None
    machine: str
    version: int = CALIBRATION_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return (f"{self.sft_tokens_per_second:,.0f} SFT tokens/s on the fixed calibration micro-batch "
                f"({_BATCH}x{_SEQ_LEN} tokens, {self.torch_threads} torch threads, {self.cpu_count} CPUs, {self.machine})")


def measure_machine(steps: int = _STEPS, threads: int | None = None) -> Calibration:
    """Time ``steps`` SFT optimizer steps of the fixed workload (after one untimed warm-up step), on ``threads``
    torch threads (None: the process's count; the caller's count is restored afterwards either way)."""
    import torch

    default_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _measure(steps)
    finally:
        torch.set_num_threads(default_threads)


def calibrations_at_stage_threads(stage_threads: dict[str, int], taken_at: int) -> dict[int, Calibration]:
    """One more calibration at each thread count a step ran on other than ``taken_at``, the count the run's
    calibrations were taken at: where a step dropped to one thread beside a busy neighbour, two threads measure a
    collapse it never ran into (``quickstart.timing``)."""
    return {n: measure_machine(threads=n) for n in sorted(set(stage_threads.values())) if n != taken_at}


def _measure(steps: int) -> Calibration:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from deepresearcher.warmstart.sft import next_token_loss

    generator = torch.Generator().manual_seed(0)
    config = Qwen2Config(vocab_size=_VOCAB, hidden_size=_HIDDEN, intermediate_size=_MLP, num_hidden_layers=_LAYERS,
                         num_attention_heads=_HEADS, num_key_value_heads=_KV_HEADS, max_position_embeddings=_SEQ_LEN,
                         tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, bos_token_id=None)
    with torch.random.fork_rng():  # a fixed init that leaves the caller's random state alone
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config).train()
    ids = torch.randint(2, _VOCAB, (_BATCH, _SEQ_LEN), generator=generator)
    mask = torch.ones_like(ids)
    weights = torch.zeros(_BATCH, _SEQ_LEN)
    weights[:, _SEQ_LEN // 4 :: 2] = 1.0  # a third of the positions scored, as policy tokens of an episode
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        loss = next_token_loss(model, ids, mask, weights)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(_WARMUP_STEPS):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    seconds = time.perf_counter() - start
    return Calibration(
        sft_tokens_per_second=round(steps * _BATCH * _SEQ_LEN / seconds, 1), seconds=round(seconds, 2),
        torch_threads=torch.get_num_threads(), cpu_count=os.cpu_count(),
        machine=_cpu_name(),
    )


def _cpu_name() -> str:
    """The CPU's model name where the OS tells it (Linux), else the platform's machine type."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
