"""The judges of an eval: the answer judge and the grounding judge of the behaviour table.

The answer judge (the paper's MBE prompt and ReARTeR's, ``Judge``) lives in ``deepresearcher.reward.judge``,
since the judge reward (``reward.metric: judge``) asks it too; it is re-exported here for the eval's callers.
What only evaluation asks is here: whether the observations an agent read support its answer
(``supported``, ``eval.judge_grounding``), the judged label beside the behaviour table's grounding rule.

Example::

    judge = Judge(make_chat_client(cfg.eval.judge), cache=cache, prompt=cfg.eval.judge_prompt)
    verdict = await supported(judge, "Who wrote Dune?", "Frank Herbert", observed_text(trajectory))
"""

from __future__ import annotations

import logging

from deepresearcher.errors import BackendError
from deepresearcher.llm.base import Message
from deepresearcher.reward.judge import (
    JUDGE_PROMPTS,
    MBE_PROMPT,
    MBE_SYSTEM,
    REARTER_PROMPT,
    Judge,
    JudgePrompt,
    Verdict,
    parse_mbe,
    parse_verdict,
)

__all__ = [
    "GROUNDING_EVIDENCE_CHARS", "GROUNDING_PROMPT", "JUDGE_PROMPTS", "MBE_PROMPT", "MBE_SYSTEM", "REARTER_PROMPT",
    "Judge", "JudgePrompt", "Verdict", "parse_mbe", "parse_verdict", "supported",
]

logger = logging.getLogger(__name__)

GROUNDING_PROMPT = (
    "A research agent read the search results and page notes below, then answered the question. Is its answer "
    "stated in, or directly supported by, these observations? Judge only the support the observations give, not "
    "whether the answer is true.\n\nQuestion: {question}\n\nObservations:\n{evidence}\n\nAnswer: {answer}\n\n"
    "Reply with one word: True or False."
)
"""The judged label of the behaviour table's grounding (``eval.judge_grounding``): one call at temperature 0."""
GROUNDING_VERSION = "dr-grounding-v1"
"""Part of the grounding verdicts' cache keys: change it whenever ``GROUNDING_PROMPT`` changes."""
GROUNDING_EVIDENCE_CHARS = 12000
"""Observations shown to the grounding judge at most (the first ones, in reading order), so long episodes fit."""


async def supported(judge: Judge, question: str, answer: str, evidence: str) -> Verdict:
    """Whether ``evidence`` (the observations an agent read) supports ``answer``, asked of ``judge``'s model and
    cache: the judged label beside the behaviour table's grounding rule. ``by`` is ``model`` for a verdict,
    ``unparsed`` or ``error`` for none."""
    evidence = evidence[:GROUNDING_EVIDENCE_CHARS]
    messages: list[Message] = [{"role": "user", "content": GROUNDING_PROMPT.format(
        question=question.strip(), evidence=evidence, answer=answer.strip())}]

    async def ask() -> str:
        return (await judge.client.chat(messages, max_tokens=8, temperature=0.0)).text

    request = {"question": question, "answer": answer.strip(), "evidence": evidence}
    try:
        reply = await ask() if judge.cache is None else await judge.cache.cached(
            "judge", judge.model_name, request, {"prompt": GROUNDING_VERSION}, ask)
    except BackendError as exc:
        logger.warning("grounding judge %s failed on %r: %s", judge.model_name, question[:80], exc)
        return Verdict(False, "error", str(exc), asked=1)
    decided = parse_verdict(reply)
    return Verdict(bool(decided), "unparsed" if decided is None else "model", reply, asked=1,
                   unparsed=int(decided is None))
