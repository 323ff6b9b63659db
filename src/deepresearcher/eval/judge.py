"""The LLM judge ("model-based evaluation" in the paper): is a predicted answer correct?

Token metrics punish right answers phrased differently ("JFK" vs "John F. Kennedy"), so the paper also
reports a judge's verdict. As there, an exact match (after SQuAD normalization, against any alias)
counts as correct without a call; otherwise a chat model, through any client of
``deepresearcher.llm`` (an OpenAI-compatible server, a local model, the embedded SmolLM2), answers
True or False. Every call is recorded in the web cache under kind ``judge``, keyed by the judge model,
question, answer and golds, so a rerun (or another eval that asks the same) costs nothing.

A reply is read robustly: the first standalone true/false/correct/incorrect/yes/no decides, in any
case, with or without punctuation or markdown; a reply with none of them is ``unparsed`` and counts as
incorrect, never as an error, so one bad reply cannot stop an eval.

Example::

    judge = Judge(make_chat_client(cfg.eval.judge), cache=cache)
    verdict = await judge.judge("Who wrote Dune?", "Frank Herbert", ["Frank Herbert"])   # by="exact"
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass
from typing import Any, Literal

from deepresearcher.errors import BackendError
from deepresearcher.llm.base import ChatClient, Message
from deepresearcher.reward import exact_match, normalize_answer

__all__ = ["JUDGE_PROMPT", "PROMPT_VERSION", "Judge", "Verdict", "parse_verdict"]

logger = logging.getLogger(__name__)

PROMPT_VERSION = "dr-judge-v1"
"""Part of every cache key: change it whenever the prompt changes, so old verdicts are not reused."""

JUDGE_PROMPT = (
    "Given a Question and its Golden Answer, verify whether the Predicted Answer is correct. The prediction "
    "is correct if it fully aligns with the meaning and key information of the Golden Answer. Respond with "
    "True if the prediction is correct and False otherwise.\n\n"
    "Question: {question}\nGolden Answer: {golds}\nPredicted Answer: {answer}\n\n"
    "Reply with one word: True or False."
)
"""The paper's judge instruction (its appendix), with the golds joined by `` | ``."""

_POSITIVE = {"true", "correct", "yes"}
_NEGATIVE = {"false", "incorrect", "no", "wrong"}
_WORD = re.compile(r"[a-z]+")

JudgedBy = Literal["exact", "model", "unparsed", "no_answer", "error"]


@dataclass(frozen=True)
class Verdict:
    """A judgement: ``correct``, and how it was reached (``by``) with the judge's raw reply if any."""

    correct: bool
    by: JudgedBy
    reply: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_verdict(reply: str) -> bool | None:
    """True/False from a judge reply, or None when it says neither.

    >>> parse_verdict("**True**"), parse_verdict("Incorrect."), parse_verdict("FALSE - it names the city")
    (True, False, False)
    >>> parse_verdict("I am not sure") is None
    True
    """
    for word in _WORD.findall(reply.lower()):
        if word in _POSITIVE:
            return True
        if word in _NEGATIVE:
            return False
    return None


class Judge:
    """Judges answers with one chat client; exact matches and empty answers never reach the model."""

    def __init__(
        self, client: ChatClient, *, cache: Any = None, model_name: str | None = None, max_tokens: int = 8
    ) -> None:
        self.client = client
        self.cache = cache
        self.model_name = model_name or getattr(client, "model", "") or "judge"
        self.max_tokens = max_tokens

    def messages(self, question: str, answer: str, golds: list[str]) -> list[Message]:
        """The chat the judge model sees."""
        prompt = JUDGE_PROMPT.format(question=question.strip(), golds=" | ".join(golds), answer=answer.strip())
        return [{"role": "user", "content": prompt}]

    async def _ask(self, messages: list[Message]) -> str:
        result = await self.client.chat(messages, max_tokens=self.max_tokens, temperature=0.0)
        return result.text

    async def judge(self, question: str, answer: str | None, golds: list[str]) -> Verdict:
        """The verdict on one answer; a failing judge model gives ``by="error"`` (incorrect), not an exception."""
        if answer is None or not normalize_answer(answer):
            return Verdict(False, "no_answer")
        if exact_match(answer, golds):
            return Verdict(True, "exact")
        messages = self.messages(question, answer, golds)
        request = {"question": normalize_answer(question), "answer": answer.strip(), "golds": sorted(golds)}
        try:
            if self.cache is None:
                reply = await self._ask(messages)
            else:
                reply = await self.cache.cached(
                    "judge", self.model_name, request, {"prompt": PROMPT_VERSION}, lambda: self._ask(messages)
                )
        except BackendError as exc:
            logger.warning("judge %s failed on %r: %s", self.model_name, question[:80], exc)
            return Verdict(False, "error", str(exc))
        decided = parse_verdict(reply)
        if decided is None:
            logger.info("judge reply without a verdict: %r", reply[:120])
            return Verdict(False, "unparsed", reply)
        return Verdict(decided, "model", reply)

    async def aclose(self) -> None:
        """Close the client, and the cache if one was given (the judge owns both)."""
        await self.client.aclose()
        if self.cache is not None:
            await self.cache.aclose()
