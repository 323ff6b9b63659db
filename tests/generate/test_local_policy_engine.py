"""Which engine decodes a local ``agent.policy`` for ``eval`` and ``research``: vLLM in process on a GPU where vLLM
is installed, else the local engine, and always the local engine for ``local:``.

vLLM needs a CUDA GPU, so vLLM is stood in by ``testing.vllm_python`` (its Python API, CPU only) and the GPU by
``device.on_gpu``; the model is the tiny checkpoint, really loaded wherever the local engine is chosen.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from deepresearcher.config import load_config
from deepresearcher.generate.factory import make_policy
from deepresearcher.generate.vllm_gen import VLLMEngineGenerator
from deepresearcher.inference import device
from deepresearcher.inference.engine import LocalEngine
from deepresearcher.testing.vllm_python import vllm_modules


@pytest.fixture
def vllm_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, module in vllm_modules().items():
        monkeypatch.setitem(sys.modules, name, module)


def _policy(policy: str, seed: int = 0):
    return make_policy(load_config(None, [f"agent.policy={policy}"]), seed=seed)


async def _close(generator) -> None:
    await generator.aclose()


async def test_on_a_gpu_with_vllm_a_model_directory_decodes_with_vllm(
        tiny_model_dir: Path, vllm_installed: None, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(device, "on_gpu", lambda: True)
    with caplog.at_level(logging.INFO, logger="deepresearcher.generate.factory"):
        generator, tokenizer = _policy(str(tiny_model_dir), seed=7)
    assert isinstance(generator, VLLMEngineGenerator)
    assert generator._engine.args.model == str(tiny_model_dir) and generator._engine.args.seed == 7
    assert tokenizer.name_or_path == str(tiny_model_dir), "the chat template comes from the model's own tokenizer"
    assert "vLLM in process" in caplog.text
    await _close(generator)
    assert generator._engine.shut_down


@pytest.mark.parametrize("why", ["cpu", "no vllm", "local:"])
async def test_otherwise_the_local_engine_decodes(why: str, tiny_model_dir: Path, vllm_installed: None,
                                                  monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """On the CPU, without vLLM, or with ``local:`` before the name even on a GPU with vLLM."""
    monkeypatch.setattr(device, "on_gpu", lambda: why != "cpu")
    if why == "no vllm":
        monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` fails, as where it is not installed
    policy = f"local:{tiny_model_dir}" if why == "local:" else str(tiny_model_dir)
    with caplog.at_level(logging.INFO, logger="deepresearcher.generate.factory"):
        generator, _ = _policy(policy)
    assert isinstance(generator, LocalEngine)
    assert "the local engine" in caplog.text
    await _close(generator)


def test_local_names_nothing_else() -> None:
    from deepresearcher.errors import ConfigError

    with pytest.raises(ConfigError, match="local:"):
        _policy("local:/no/such/model")
