"""Clients for the models that are not the policy (the reader, a judge).

``make_chat_client(config)`` returns a :class:`ChatClient` for an OpenAI-compatible server, a local
transformers model, or the embedded SmolLM2; ``list_local_models()`` says what is available offline.
"""

from deepresearcher.llm.base import ChatClient, ChatResult, Message, Usage
from deepresearcher.llm.catalog import LocalModel, list_local_models
from deepresearcher.llm.factory import make_chat_client

__all__ = ["ChatClient", "ChatResult", "LocalModel", "Message", "Usage", "list_local_models", "make_chat_client"]
