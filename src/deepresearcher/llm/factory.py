"""Build the chat client a config section asks for; heavy imports happen only for the chosen kind."""

from __future__ import annotations

from pathlib import Path

from deepresearcher.config import LLMClientConfig
from deepresearcher.llm.base import ChatClient


def make_chat_client(config: LLMClientConfig, cache_dir: Path | None = None) -> ChatClient:
    """An ``openai``, ``local`` or ``embedded`` client for ``config`` (e.g. ``Config.reader_llm``).

    ``cache_dir`` (``Config.resolved_cache_dir()``) is where the embedded model keeps its fp32 conversion.
    """
    if config.kind == "openai":
        from deepresearcher.llm.openai_compat import OpenAIChatClient

        return OpenAIChatClient(config)
    if config.kind == "local":
        from deepresearcher.llm.local import LocalChatClient

        return LocalChatClient.from_config(config, cache_dir)
    from deepresearcher.llm.embedded import embedded_chat_client

    return embedded_chat_client(config, cache_dir=cache_dir)
