"""Fixtures of the training tests: a real tokenizer and a real (tiny, random) Qwen2 model on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from deepresearcher.config import TinyModelConfig
from deepresearcher.train.tiny_model import build_tiny_checkpoint

CORPUS = [
    "Vesk is the capital of Norland. Alice Brown was born in 1901 in Vesk and founded Acme Works.",
    "Who founded Acme Works? web_search browse_webpage query url_list https://wiki.example/acme",
] * 40


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A from-scratch tokenizer plus a ~0.1M-parameter Qwen2 model, built once per test session."""
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("tiny") / "model"
    spec = TinyModelConfig(vocab_size=400, hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1,
                           intermediate_size=64, max_positions=2048)
    return build_tiny_checkpoint(CORPUS, out, spec)
