"""The extractive (BM25) reader on real text: accents do not decide whether a passage matches."""

from __future__ import annotations

from deepresearcher.web.reader.base import ReadRequest
from deepresearcher.web.reader.extractive import ExtractiveReader

FILLER = "The market sold apples and pears, and the weather stayed mild all week. "
CAFE = "The Café Zürich opened on the Limmat quay in 1893. "
PAGE = "\n\n".join([FILLER * 6, CAFE + FILLER * 2, FILLER * 6])


async def test_a_question_without_accents_finds_the_accented_passage():
    """"cafe" in the question finds the passage that writes "Café", and a note held with other accents
    is not returned again."""
    reader = ExtractiveReader(chunk_chars=300, top_passages=1)
    request = ReadRequest(question="When did the cafe in Zurich open?", url="http://w/p", text=PAGE)
    [note] = await reader.read(request)
    assert CAFE.strip() in note.text
    held = note.text.replace("Café Zürich", "Cafe Zurich")
    assert all(n.chunk != note.chunk for n in await reader.read(request.model_copy(update={"notes": [held]})))
