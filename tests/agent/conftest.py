"""Shared fixtures for agent tests: the SmolLM2 tokenizer, and it and the Qwen2.5 one (``tests/conftest.py``)
as one parametrized ``tokenizer``."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """The embedded SmolLM2's tokenizer, from the one converted checkpoint of this test session's cache."""
    from transformers import AutoTokenizer

    from deepresearcher.config import Config
    from deepresearcher.inference.embedded import smollm2_checkpoint

    return AutoTokenizer.from_pretrained(str(smollm2_checkpoint(Config().resolved_cache_dir())))


@pytest.fixture(params=["qwen2.5", "smollm2"])
def tokenizer(request, qwen_tokenizer, smollm2_tokenizer):
    """Each test that takes ``tokenizer`` runs against both known-good chat templates."""
    return qwen_tokenizer if request.param == "qwen2.5" else smollm2_tokenizer
