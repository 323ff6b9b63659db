"""The one model loader: a model name from config to a checkpoint directory, and to a model in memory.

Names are resolved the same way wherever a model is named (``agent.policy``, ``train.model``, a
reader's or judge's ``model``): the embedded SmolLM2 (``smollm2``, ``smollm2-135m``) becomes its
float32 checkpoint in the user cache (``inference.embedded.smollm2_checkpoint``); anything else must
be a checkpoint directory on disk. Models loaded for inference are kept once per process, so a policy
and a reader on the same model share its weights.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import platformdirs

from deepresearcher.errors import ConfigError
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
    """``(model, tokenizer)`` of a checkpoint directory, in eval mode: float32 on CPU, bfloat16 on a GPU.

    With ``shared`` (inference) one copy per directory is kept for the process; pass ``shared=False`` for a
    copy of one's own (e.g. to train it).
    """
    key = Path(path).resolve()
    with _lock:
        if shared and key in _loaded:
            return _loaded[key]
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        logger.info("loading %s on %s", key, device)
        model = AutoModelForCausalLM.from_pretrained(str(key), dtype=dtype).to(device).eval()
        loaded = (model, AutoTokenizer.from_pretrained(str(key)))
        if shared:
            _loaded[key] = loaded
        return loaded


def load_model(name: str | Path, cache_dir: Path | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for a model name from config (see :func:`resolve_checkpoint`), shared per process."""
    return load_checkpoint(resolve_checkpoint(name, cache_dir))
