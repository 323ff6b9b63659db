"""The guided answer: the model reads what the tools returned, says what it found, and picks its answer from it.

A 135M model cannot find one fact in a 2,000-token agent context, but it answers a question about a short
text in a sentence (``The Quiet Signal of Diaquou was released in 1911.``), and it can pick the short answer
among a few phrases. So the answer turn is read in a prompt of its own, the *reading prompt* (a chat turn holding
only the notes of the pages read and the question), in two steps:

1. the model answers in one sentence, freely (its thought in the answer turn);
2. the phrases of that sentence that the pages contain and the question does not (``answer_phrases``; a word
   of the sentence stands for a page's word of the same stem: ``biology`` names ``biologist``) are the answer's
   candidates, and the model picks one; when its sentence names none, the candidates are the pages' short
   phrases (``page_phrases``). Either way only phrases of the kind the question asks for (``answer_kind``: a
   number for *what year*, *when*, *how many*; a name for *who*, *where*, *which city*) stay, when some are. A
   yes-or-no question picks between yes and no.

Either way the answer is text the pages hold (or yes/no), never words of the question or of the model's memory;
only when nothing at all was read does the model write it freely.
"""

from __future__ import annotations

import re
from typing import Any

from deepresearcher.agent.guide.constraints import Choice, FreeText, Vocabulary
from deepresearcher.generate.base import Generator, SamplingParams

SENTENCE_TOKENS = 40
"""Most tokens of the model's answer sentence."""
ANSWER_TOKENS = 16
"""Most tokens of an answer written freely (when nothing was read)."""
READ_INSTRUCTION = "Text:\n{notes}\n\nUsing the text, answer in one sentence: {question}"
"""The reading prompt's user turn."""
PICK_INSTRUCTION = "Give only the answer, in a few words."
"""The user turn after the model's sentence, before it picks its answer."""
_EDGE_WORDS = frozenset("a an the by in at of on to from for with as is was are were be".split())
"""Words a phrase does not start or end with (``by Braebax Collective`` is ``Braebax Collective``)."""
_YES_NO_OPENERS = frozenset("is are was were do does did has have had can could will would should".split())
"""First words of a yes-or-no question, which the system turn says to answer with yes or no."""
PHRASE_WORDS = 4
"""Most words of a candidate (an answer is a name, a number, a few words)."""
_NUMBER_QUESTION = re.compile(r"\b(?:what|which) year\b|\bwhen\b|\bhow (?:many|much|old|long)\b|\bpopulation\b",
                              re.IGNORECASE)
_NAME_QUESTION = re.compile(r"^\s*(?:who|whom|whose|where)\b|\b(?:which|what) (?:city|town|country|place|"
                            r"organi[sz]ation|company|person|team|group|university)\b", re.IGNORECASE)
_CONTROL = "".join(map(chr, range(32)))
_SESSION_SALT = 0x5EAD_5EAD_5EAD
_WORD = re.compile(r"\d+(?:[.,]\d+)*|\w+")
"""A word; a number keeps its separators (``994,100`` is one word)."""


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _stem(word: str) -> str | None:
    """A word's first five letters, for words of five letters or more: ``organized`` and ``organizes`` share it."""
    return word[:5].lower() if len(word) >= 5 and word.isalpha() else None


def answer_kind(question: str) -> str | None:
    """What the question asks for: ``number`` (what year, when, how many), ``name`` (who, where, which city,
    which organization) or None (anything)."""
    if _NUMBER_QUESTION.search(question):
        return "number"
    return "name" if _NAME_QUESTION.search(question) else None


def of_kind(phrase: str, kind: str | None) -> bool:
    """Whether ``phrase`` is of the ``kind`` the question asks for (numbers hold a digit, names are capitalized)."""
    if kind == "number":
        return any(ch.isdigit() for ch in phrase)
    if kind == "name":
        return all(w[0].isupper() for w in _words(phrase))
    return True


class _Asked:
    """Whether a word is one of the question's: the same word, or one of its forms (``organized`` for
    ``organizes``: the same first five letters, in words of five letters or more)."""

    def __init__(self, question: str) -> None:
        words = {w.lower() for w in _words(question)}
        self._words, self._stems = words, {_stem(w) for w in words} - {None}

    def __call__(self, word: str) -> bool:
        return word.lower() in self._words or _stem(word) in self._stems


def yes_no(question: str) -> bool:
    """Whether ``question`` is a yes-or-no question (it opens with an auxiliary verb)."""
    words = _words(question.lower())
    return bool(words) and words[0] in _YES_NO_OPENERS


def answer_phrases(sentence: str, sources: list[str], question: str) -> list[str]:
    """The maximal phrases of ``sentence``'s first sentence that occur word for word in one line of ``sources`` and
    share no word with ``question``, without function words at their edges, in order."""
    asked = _Asked(question)
    lines = [" " + " ".join(_words(line.lower())) + " " for source in sources for line in source.splitlines()]
    page_words: dict[str, str] = {}  # stem -> the first page word of that stem
    for word in _words(" ".join(sources)):
        stem = _stem(word)
        if stem is not None and not asked(word):
            page_words.setdefault(stem, word)
    first = re.split(r"[.!?](?=\s|$)|\n", sentence, maxsplit=1)[0]
    words = [w if f" {w.lower()} " in " ".join(lines) + " " else page_words.get(_stem(w) or "", w) for w in _words(first)]

    def on_page(span: list[str]) -> bool:
        needle = " " + " ".join(w.lower() for w in span) + " "
        return any(needle in line for line in lines)

    phrases: list[str] = []
    i = 0
    while i < len(words):
        if asked(words[i]) or words[i].lower() in _EDGE_WORDS or not on_page(words[i : i + 1]):
            i += 1
            continue
        j = i + 1
        while j < len(words) and not asked(words[j]) and on_page(words[i : j + 1]):
            j += 1
        span = words[i:j]
        while span and span[-1].lower() in _EDGE_WORDS:
            span.pop()
        if span and " ".join(span) not in phrases:
            phrases.append(" ".join(span))
        i = j
    return phrases


def page_phrases(sources: list[str], question: str) -> list[str]:
    """The maximal phrases of the pages' lines, between punctuation, that share no word with ``question``, without
    function words at their edges, of ``PHRASE_WORDS`` words at most: the candidates when the model's sentence
    named nothing the pages hold."""
    asked = _Asked(question)
    phrases: list[str] = []
    for source in sources:
        for segment in re.split(r"(?:[^\w\s'.,-]|[.,](?!\d)|(?<!\d)[.,])+|\n", source):
            run: list[str] = []
            for word in [*_words(segment), ""]:
                if word and not asked(word):
                    run.append(word)
                    continue
                while run and run[0].lower() in _EDGE_WORDS:
                    run.pop(0)
                while run and run[-1].lower() in _EDGE_WORDS:
                    run.pop()
                if run and len(run) <= PHRASE_WORDS and " ".join(run) not in phrases:
                    phrases.append(" ".join(run))
                run = []
    return phrases


def candidates(sentence: str, sources: list[str], question: str) -> list[str]:
    """The answers the model picks among: yes and no for a yes-or-no question; else the phrases its sentence names
    (``answer_phrases``), or else the pages' (``page_phrases``); of the kind the question asks for when some are."""
    if yes_no(question):
        return ["yes", "no"]
    kind = answer_kind(question)
    named = [p for p in answer_phrases(sentence, sources, question) if len(_words(p)) <= PHRASE_WORDS]
    found = page_phrases(sources, question)
    for phrases in ([p for p in named if of_kind(p, kind)], [p for p in found if of_kind(p, kind)], named, found):
        if phrases:
            return phrases
    return []


class Reader:
    """Runs the two steps of the module with one policy's tokenizer."""

    def __init__(self, tokenizer: Any, vocab: Vocabulary, encode: Any) -> None:
        self.tokenizer, self.vocab, self.encode = tokenizer, vocab, encode
        self._sentence = FreeText(vocab, banned="<>" + _CONTROL.replace("\n", ""), end="\n")

    def _prompt(self, messages: list[dict[str, str]]) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.encode(text)

    async def answer(self, generator: Generator, question: str, sources: list[str],
                     params: SamplingParams) -> tuple[str, str]:
        """(the model's sentence, its answer) for ``question`` from the texts read, ``sources``."""
        session = None if params.session is None else params.session ^ _SESSION_SALT  # its own KV cache
        base = params.model_copy(update={"session": session})
        messages = [{"role": "user", "content": READ_INSTRUCTION.format(notes="\n".join(sources), question=question)}]
        said = await generator.generate(self._prompt(messages), base.model_copy(update={
            "max_tokens": SENTENCE_TOKENS, "stop": ["\n"], "constraint": self._sentence}))
        sentence = self.vocab.text(said.token_ids).strip()
        messages += [{"role": "assistant", "content": sentence}, {"role": "user", "content": PICK_INSTRUCTION}]
        phrases = candidates(sentence, sources, question)
        if len(phrases) == 1:
            return sentence, phrases[0]
        options = [phrase + "\n" for phrase in phrases]
        constraint = Choice(self.vocab, self.encode, options) if options else self._sentence
        limit = max((len(self.encode(option)) for option in options), default=ANSWER_TOKENS)
        picked = await generator.generate(self._prompt(messages), base.model_copy(update={
            "max_tokens": limit, "stop": ["\n"], "constraint": constraint}))
        return sentence, self.vocab.text(picked.token_ids).strip()
