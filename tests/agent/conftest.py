"""Shared fixtures for agent tests: the two offline tokenizers, built once and kept in pytest's cache."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tokenizer_cache(request, tmp_path_factory) -> Path:
    """Converted tokenizers are deterministic build products; keep them across runs when pytest's cache is on."""
    cache = getattr(request.config, "cache", None)
    return Path(cache.mkdir("deepresearcher-tokenizers")) if cache is not None else tmp_path_factory.mktemp("tok")


@pytest.fixture(scope="session")
def qwen_tokenizer(tokenizer_cache):
    from deepresearcher.inference.embedded import load_qwen25_tokenizer

    return load_qwen25_tokenizer(tokenizer_cache)


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
