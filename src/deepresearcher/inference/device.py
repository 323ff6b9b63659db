"""The one device choice: where every model of this process runs (``runtime.device``: auto, cpu, cuda).

Every path that loads a model (SFT, GRPO, validation, evaluation, research, readers, benchmarks) goes
through ``inference.loader``, which asks :func:`current` here; nothing else picks a device. Commands call
:func:`configure` once with the config's choice (``cli.common.resolve_config``); code that never heard of
a config (a library user's script, a test) gets ``auto``: the GPU when torch sees one, else the CPU.
``tests/test_device_choice.py`` fails if a model is loaded anywhere else.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Literal

from deepresearcher.errors import ConfigError

if TYPE_CHECKING:
    import torch

DeviceChoice = Literal["auto", "cpu", "cuda"]
CHOICES: tuple[str, ...] = ("auto", "cpu", "cuda")

_lock = threading.Lock()
_choice: DeviceChoice = "auto"


def resolve(choice: str) -> torch.device:
    """The torch device ``choice`` names on this machine; ``cuda`` without a visible GPU is an error that says so."""
    import torch

    if choice not in CHOICES:
        raise ConfigError(f"runtime.device={choice!r} is not a device choice; use one of {', '.join(CHOICES)}.")
    if choice == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        # Under torchrun / accelerate launch each process owns the GPU of its LOCAL_RANK (as accelerate places
        # it); models load before the trainer's set_device, so current_device() would still say GPU 0 for all.
        local_rank = os.environ.get("LOCAL_RANK")
        return torch.device("cuda", int(local_rank) if local_rank else torch.cuda.current_device())
    if choice == "cuda":
        raise ConfigError("runtime.device=cuda but torch sees no CUDA GPU (torch.cuda.is_available() is False): "
                          "install a CUDA build of torch, or set runtime.device=auto or cpu.")
    return torch.device("cpu")


def configure(choice: str) -> torch.device:
    """Set this process's device choice (checked now, so a bad one fails before any work) and return its device."""
    global _choice
    device = resolve(choice)
    with _lock:
        _choice = choice  # type: ignore[assignment]
    return device


def choice() -> DeviceChoice:
    """The process's device choice as configured (``auto`` until a command configures it)."""
    return _choice


def current() -> torch.device:
    """The device models of this process load onto."""
    return resolve(_choice)


def on_gpu() -> bool:
    """Whether models of this process run on a CUDA GPU."""
    return current().type == "cuda"
