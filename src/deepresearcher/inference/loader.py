"""The one model loader: a model name from config to a checkpoint directory, and to a model in memory.

Names are resolved the same way wherever a model is named (``agent.policy``, ``train.model``, a
reader's or judge's ``model``): the embedded SmolLM2 (``smollm2``, ``smollm2-135m``) becomes its
float32 checkpoint in the user cache (``inference.embedded.smollm2_checkpoint``); anything else must
be a checkpoint directory on disk. Models loaded for inference are kept once per process, so a policy
and a reader on the same model share its weights.

This is also the only place a model is loaded into memory, always onto the process's one device choice
(``inference.device.current()``, set from ``runtime.device``): :func:`load_checkpoint` for inference,
:func:`load_trainable` for a copy to train, :func:`load_encoder` for the embedding reader's encoder.
``tests/test_device_choice.py`` fails on a model loaded anywhere else (the embedded GGUF's conversion to a
checkpoint in ``inference.embedded`` is a file conversion on the CPU, and ``quickstart.tiny_model`` creates a model
rather than loading one).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import platformdirs

from deepresearcher.errors import ConfigError
from deepresearcher.inference import device
from deepresearcher.inference.embedded import EMBEDDED_NAMES, smollm2_checkpoint

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_loaded: dict[Path, tuple[Any, Any]] = {}


def resolve_checkpoint(name: str | Path, cache_dir: Path | None = None) -> Path:
    """The checkpoint directory ``name`` stands for (the embedded model is converted on first use, into
    ``cache_dir``: default the user cache directory, as ``Config.resolved_cache_dir``)."""
    if str(name) in EMBEDDED_NAMES:
        return smollm2_checkpoint(cache_dir or Path(platformdirs.user_cache_dir("deepresearcher")))
    path = Path(name).expanduser()
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"Model {str(name)!r} is neither a checkpoint directory (with config.json) nor the embedded model "
            f"({', '.join(EMBEDDED_NAMES)}); pass a Hugging Face checkpoint directory on disk."
        )
    return path


def load_checkpoint(path: str | Path, *, shared: bool = True) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a checkpoint directory for inference, in eval mode on the process's device:
    bfloat16 on a GPU, float32 on the CPU.

    With ``shared`` one copy per directory is kept for the process; pass ``shared=False`` for a copy of one's own.
    """
    key = Path(path).resolve()
    with _lock:
        if shared and key in _loaded:
            return _loaded[key]
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        target = device.current()
        dtype = torch.bfloat16 if target.type == "cuda" else torch.float32
        logger.info("loading %s on %s", key, target)
        model = AutoModelForCausalLM.from_pretrained(str(key), dtype=dtype).to(target).eval()
        loaded = (model, AutoTokenizer.from_pretrained(str(key)))
        if shared:
            _loaded[key] = loaded
        return loaded


def load_trainable(path: str | Path) -> Any:
    """A model of its own from a checkpoint directory, to train: float32 weights (trainers autocast to bfloat16
    where ``train.bf16`` asks, so weights, gradients and optimizer state stay float32) on the process's device,
    in train mode. Its tokenizer is the caller's to load (``AutoTokenizer``), as tokenizers have no device."""
    import torch
    from transformers import AutoModelForCausalLM

    target = device.current()
    logger.info("loading %s to train on %s", path, target)
    return AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).to(target).train()


def load_encoder(path: str | Path) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of an encoder checkpoint (``AutoModel``: the embedding reader's MiniLM), float32
    in eval mode on the process's device. Not shared here: its one caller keeps one copy per process."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    target = device.current()
    logger.info("loading encoder %s on %s", path, target)
    model = AutoModel.from_pretrained(str(path), dtype=torch.float32).to(target).eval()
    return model, AutoTokenizer.from_pretrained(str(path))


def load_model(name: str | Path, cache_dir: Path | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for a model name from config (see :func:`resolve_checkpoint`), shared per process."""
    return load_checkpoint(resolve_checkpoint(name, cache_dir))
