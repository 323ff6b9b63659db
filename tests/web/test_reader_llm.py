"""The LLM reader against a real loopback OpenAI-compatible server scripted to answer like a reader."""

from __future__ import annotations

import logging
import re
import tracemalloc

import pytest

from deepresearcher.config import LLMClientConfig
from deepresearcher.llm.openai_compat import OpenAIChatClient
from deepresearcher.testing.openai_server import (
    GARBAGE,
    PAGE_DOWN,
    STOP,
    OpenAIEmulator,
    Reply,
    chunk_of,
    extract,
    keyword_reader,
)
from deepresearcher.web.reader.base import ReadRequest
from deepresearcher.web.reader.llm import LLMReader, parse_reply

FILLER = "The weather was mild and the market sold apples, pears and plums. "
NEEDLE = "Marta Quell was born in Oradea in 1931."
QUESTION = "Where was Marta Quell born?"


def page(needle_at: int, paragraphs: int = 12) -> str:
    """Paragraphs of filler with the needle sentence in paragraph ``needle_at``."""
    parts = [FILLER * 3 for _ in range(paragraphs)]
    parts[needle_at] = FILLER + NEEDLE + " " + FILLER
    return "\n\n".join(parts)


def client_for(server: OpenAIEmulator, **overrides) -> OpenAIChatClient:
    values = {"kind": "openai", "base_url": server.base_url, "model": "emu", "backoff_s": 0.01, "timeout_s": 1.0}
    values.update(overrides)
    return OpenAIChatClient(LLMClientConfig(**values))


def request(text: str, notes: list[str] | None = None) -> ReadRequest:
    return ReadRequest(question=QUESTION, url="http://w/Marta_Quell", text=text, query="Marta Quell birthplace",
                       notes=notes or [])


async def test_reads_chunks_in_order_until_the_fact_then_stops():
    """Pages down through chunks without the fact, extracts it from its chunk, and stops there."""
    text = page(needle_at=5)
    with OpenAIEmulator(responder=keyword_reader(["Marta Quell"])).running() as server:
        async with client_for(server) as client:
            reader = LLMReader(client, chunk_tokens=64, max_chunks=50)
            notes = await reader.read(request(text))
    chunks_seen = [chunk_of(body) for body in server.requests]
    assert NEEDLE in chunks_seen[-1] and not any(NEEDLE in c for c in chunks_seen[:-1])
    starts = [text.index(c) for c in chunks_seen]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    assert [n.text for n in notes] == [NEEDLE]
    assert notes[0].chunk == len(chunks_seen) - 1 and notes[0].url == "http://w/Marta_Quell"


async def test_prompt_carries_question_query_and_notes_so_far():
    """Each prompt holds the question, the search query, earlier notes and the chunk."""
    with OpenAIEmulator([Reply(text=extract("First fact.", read_on=True)), Reply(text=STOP)]).running() as server:
        async with client_for(server) as client:
            await LLMReader(client, chunk_tokens=64).read(request(page(0), notes=["An older note."]))
    first, second = (body["messages"][-1]["content"] for body in server.requests)
    assert QUESTION in first and "Marta Quell birthplace" in first and "An older note." in first
    assert "First fact." in second and "First fact." not in first


async def test_chunk_budget_ends_a_reader_that_always_pages_down():
    """A model that always says CONTINUE is stopped after max_chunks chunks."""
    with OpenAIEmulator(responder=lambda body: Reply(text=PAGE_DOWN)).running() as server:
        async with client_for(server) as client:
            notes = await LLMReader(client, chunk_tokens=32, max_chunks=3).read(request(page(11)))
    assert notes == [] and len(server.requests) == 3


async def test_last_chunk_ends_the_loop_and_is_marked():
    """On a short page the loop ends at the last chunk, whose prompt says it is the last part."""
    with OpenAIEmulator(responder=lambda body: Reply(text=PAGE_DOWN)).running() as server:
        async with client_for(server) as client:
            await LLMReader(client, chunk_tokens=64, max_chunks=50).read(request(FILLER * 5))
    assert 1 < len(server.requests) < 50
    assert "the last part" in server.requests[-1]["messages"][-1]["content"]
    assert "the last part" not in server.requests[0]["messages"][-1]["content"]


async def test_retries_through_429_and_timeout():
    """A 429 and a timed-out attempt are retried by the client; the reader still gets its notes."""
    script = [Reply(status=429, retry_after=0.01), Reply(text="slow", delay_s=2.0), Reply(text=extract(NEEDLE))]
    with OpenAIEmulator(script).running() as server:
        async with client_for(server, timeout_s=0.3) as client:
            notes = await LLMReader(client, chunk_tokens=64).read(request(page(0)))
            assert client.usage.retries == 2
    assert [n.text for n in notes] == [NEEDLE]


async def test_garbage_reply_means_nothing_found_stop_logged_once(caplog):
    """An unparseable reply ends the page with no notes; the warning appears once, not per page."""
    caplog.set_level(logging.DEBUG, logger="deepresearcher.web.reader.llm")
    with OpenAIEmulator(responder=lambda body: Reply(text=GARBAGE)).running() as server:
        async with client_for(server) as client:
            reader = LLMReader(client, chunk_tokens=64)
            for _ in range(3):
                assert await reader.read(request(page(0))) == []
    assert len(server.requests) == 3  # one chunk per page, then stop
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "logged once" in warnings[0].getMessage()
    assert reader.stats["unusable_replies"] == 3


async def test_notes_already_held_are_not_returned_again():
    """A fact the rollout already holds (even inside a longer note) is dropped, not returned twice."""
    held = [f"From another page: {NEEDLE} She moved later."]
    with OpenAIEmulator([Reply(text=extract(NEEDLE, read_on=True)), Reply(text=extract("New fact."))]).running() as s:
        async with client_for(s) as client:
            reader = LLMReader(client, chunk_tokens=64)
            notes = await reader.read(request(page(0), notes=held))
    assert [n.text for n in notes] == ["New fact."]
    assert reader.stats["duplicates_dropped"] == 1


@pytest.mark.parametrize(
    "name, text",
    [
        ("5 MB page", (FILLER * 80 + "\n\n") * 1000),
        ("empty page", ""),
        ("one giant line", "x" * 3_000_000),
        ("non-English page", ("東京は日本の首都です。人口は約千四百万人です。" * 2000) + "\n" + ("Москва — столица России. " * 2000)),
    ],
)
async def test_awkward_pages_stay_within_budget_and_memory(name, text):
    """Huge, empty, single-line and non-English pages: at most max_chunks calls, prompts bounded, little memory."""
    with OpenAIEmulator(responder=lambda body: Reply(text=PAGE_DOWN)).running() as server:
        async with client_for(server) as client:
            reader = LLMReader(client, chunk_tokens=128, max_chunks=3)
            tracemalloc.start()
            notes = await reader.read(request(text))
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
    assert notes == []
    assert len(server.requests) <= 3
    assert len(server.requests) == (0 if not text else 3)
    for body in server.requests:
        assert len(chunk_of(body)) <= 128 * 4
    assert peak < 2_000_000, f"{name}: reading used {peak} bytes at peak"


def test_parse_reply_tolerates_formats_small_models_write():
    """Markdown, synonyms, JSON and missing CONTINUE parse; prose without fields does not."""
    assert parse_reply("**NOTES:** Born in Oradea.\n**CONTINUE:** No").notes == "Born in Oradea."
    assert parse_reply("Relevant information: Born in Oradea.").read_on is True
    assert parse_reply('{"notes": ["a", "b"], "continue": false}') == parse_reply("NOTES: a\nb\nCONTINUE: NO")
    assert parse_reply("CONTINUE: yes").notes == ""
    assert parse_reply("") is None and parse_reply(GARBAGE) is None
    assert re.search("NONE", STOP) and parse_reply(STOP).read_on is False


async def test_prefill_starts_the_reply_and_is_parsed_with_it():
    """With a prefill, the prompt ends in an assistant message the server is asked to continue."""
    with OpenAIEmulator([Reply(text=f" {NEEDLE}\nCONTINUE: NO")]).running() as server:
        async with client_for(server) as client:
            notes = await LLMReader(client, chunk_tokens=64, prefill="NOTES:").read(request(page(0)))
    body = server.requests[0]
    assert body["messages"][-1] == {"role": "assistant", "content": "NOTES:"}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert [n.text for n in notes] == [NEEDLE]


async def test_notes_lose_prompt_echoes_and_repeated_lines():
    """What small models tack on (repeats, an echoed delimiter and instructions) is cut from the note."""
    reply = f"NOTES: {NEEDLE}\n{NEEDLE}\n---\nReply with NOTES and CONTINUE."
    with OpenAIEmulator([Reply(text=reply)]).running() as server:
        async with client_for(server) as client:
            notes = await LLMReader(client, chunk_tokens=64).read(request(page(0)))
    assert [n.text for n in notes] == [NEEDLE]
