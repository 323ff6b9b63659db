"""Fixtures of the verl integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint directory verl can load on a CPU: the offline Qwen2.5 tokenizer and a tiny Qwen2 config."""
    from transformers import Qwen2Config

    from deepresearcher.inference.embedded import load_qwen25_tokenizer

    out = tmp_path_factory.mktemp("policy")
    tokenizer = load_qwen25_tokenizer(tmp_path_factory.mktemp("tok"))
    tokenizer.save_pretrained(out)
    Qwen2Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, architectures=["Qwen2ForCausalLM"]).save_pretrained(out)
    return out
