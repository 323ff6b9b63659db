"""Shared fixtures for agent tests: the two offline tokenizers (built once per session)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def qwen_tokenizer(tmp_path_factory):
    from deepresearcher.generate.embedded import load_qwen25_tokenizer

    return load_qwen25_tokenizer(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    from deepresearcher.generate.embedded import load_smollm2_tokenizer

    return load_smollm2_tokenizer()


@pytest.fixture(params=["qwen2.5", "smollm2"])
def tokenizer(request, qwen_tokenizer, smollm2_tokenizer):
    """Each test that takes ``tokenizer`` runs against both known-good chat templates."""
    return qwen_tokenizer if request.param == "qwen2.5" else smollm2_tokenizer
