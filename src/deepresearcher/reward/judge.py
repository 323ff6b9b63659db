"""The LLM judge ("model-based evaluation", MBE, in the paper): is a predicted answer correct?

Token metrics punish right answers phrased differently ("JFK" vs "John F. Kennedy") and pay answers that hedge
("A or B" scores 0.67 F1 against gold "A"), so the paper also reports a judge's verdict, and the judge reward
(``reward.metric: judge``, ``reward.judged``) trains on it. Evaluation (``eval.judge``) and the reward ask the
same prompts through this one class. Two prompts, by name (``eval.judge_prompt``, ``reward.judge_prompt``):

* ``deepresearcher``: the paper's MBE prompt, from its evaluation script
  (``evaluate/cacluate_metrics.py`` in GAIR-NLP/DeepResearcher, Apache-2.0), as it ran there: a system
  turn "You are a helpful assistant.", temperature 0.7, the question verbatim, the golds lower-cased and
  shown as a Python list, the answer lower-cased with punctuation turned to spaces (DeepResearcher's
  normalization), and a JSON reply whose ``judgement`` is exactly ``correct`` or ``incorrect``. The answer
  is the one the original took (the first ``<answer>`` of the last assistant turn; ``reward.score_rollout``
  gives it as ``original_answer``): an empty answer, or one that normalizes to nothing (``The``), is judged
  too. An answer equal to a gold after that normalization is correct without a call, as there. A reply
  without a verdict is asked again, up to ``attempts`` times (``eval.judge_attempts``; the original asked
  without a bound).
* ``rearter``: the True/False prompt of ReARTeR (Sun et al., 2025), also used by R1-Searcher, at
  temperature 0; its exact-match shortcut uses the folded SQuAD normalization, and an answer that
  normalizes to nothing is incorrect without a call. The first standalone
  true/false/correct/incorrect/yes/no of the reply decides.

Any client of ``deepresearcher.llm`` can judge (an OpenAI-compatible server, a local model, the embedded
SmolLM2). Every call is recorded in the web cache under kind ``judge``, keyed by the judge model, prompt,
question, answer, golds and attempt, so a rerun (or another eval that asks the same) costs nothing. A
verdict says how many calls it took (``asked``) and how many replies held no verdict (``unparsed``); when
every attempt is unparsed the answer counts as incorrect (``by="unparsed"``), never as an error, so one bad
judge cannot stop an eval or a training step.

Example::

    judge = Judge(make_chat_client(cfg.eval.judge), cache=cache, prompt=cfg.eval.judge_prompt)
    verdict = await judge.judge("Who wrote Dune?", "Frank Herbert", ["Frank Herbert"])   # by="exact"
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass
from typing import Any, Literal

from deepresearcher.errors import BackendError
from deepresearcher.llm.base import ChatClient, Message
from deepresearcher.reward.deepresearcher import deepresearcher_normalize
from deepresearcher.reward.metrics import exact_match, normalize_answer

__all__ = [
    "JUDGE_PROMPTS", "MBE_PROMPT", "MBE_SYSTEM", "REARTER_PROMPT", "Judge", "JudgePrompt", "JudgePromptName", "Verdict",
    "parse_mbe", "parse_verdict",
]

logger = logging.getLogger(__name__)

MBE_PROMPT = '''You will be given a question and its ground truth answer list where each item can be a ground truth answer. Provided a pred_answer, you need to judge if the pred_answer correctly answers the question based on the ground truth answer list.
You should first give your rationale for the judgement, and then give your judgement result (i.e., correct or incorrect).

Here is the criteria for the judgement:
1. The pred_answer doesn't need to be exactly the same as any of the ground truth answers, but should be semantically same for the question.
2. Each item in the ground truth answer list can be viewed as a ground truth answer for the question, and the pred_answer should be semantically same to at least one of them.

question: {question}
ground truth answers: {gt_answer}
pred_answer: {pred_answer}

The output should in the following json format:

The output should in the following json format:
\'\'\'json
{
\"rationale\": \"your rationale for the judgement, as a text\",
\"judgement\": \"your judgement result, can only be \'correct\' or \'incorrect\'\"
}
\'\'\'
Your output:
'''
"""The paper's MBE prompt, character for character (GAIR-NLP/DeepResearcher, Apache-2.0); filled by plain replacement."""
MBE_SYSTEM = "You are a helpful assistant."
"""The system turn the paper's evaluation script sent before the MBE prompt."""

REARTER_PROMPT = (
    "Given a Question and its Golden Answer, verify whether the Predicted Answer is correct. The prediction "
    "is correct if it fully aligns with the meaning and key information of the Golden Answer. Respond with "
    "True if the prediction is correct and False otherwise.\n\n"
    "Question: {question}\nGolden Answer: {golds}\nPredicted Answer: {answer}\n\n"
    "Reply with one word: True or False."
)
"""ReARTeR's judge instruction (its LLM-as-judge accuracy; R1-Searcher reused it), golds joined by `` | ``."""

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
    asked: int = 0
    """Calls made to the judge model for this verdict."""
    unparsed: int = 0
    """Replies among them that held no verdict."""

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


def parse_mbe(reply: str) -> bool | None:
    """The ``judgement`` of the JSON object in an MBE reply, or None when there is none.

    As the original read it: the text from the first ``{`` to the last ``}`` must be JSON, and its
    ``judgement`` exactly ``correct`` or ``incorrect`` (``" Correct "`` is asked again, as there).

    >>> parse_mbe('```json\\n{"rationale": "same person", "judgement": "correct"}\\n```')
    True
    >>> parse_mbe('{"judgement": "incorrect"}'), parse_mbe("correct"), parse_mbe('{"judgement": "Correct"}')
    (False, None, None)
    """
    found = re.search(r"\{.*\}", reply, re.DOTALL)
    if found is None:
        return None
    try:
        data = json.loads(found.group())
    except json.JSONDecodeError:
        return None
    judgement = data.get("judgement") if isinstance(data, dict) else None
    return {"correct": True, "incorrect": False}.get(judgement) if isinstance(judgement, str) else None


@dataclass(frozen=True)
class JudgePrompt:
    """How one judge prompt is asked and read."""

    name: str
    version: str
    """Part of every cache key: change it whenever the prompt changes, so old verdicts are not reused."""
    temperature: float
    max_tokens: int
    attempts: int
    """Times the judge is asked until its reply holds a verdict, unless the judge is given another bound."""

    def messages(self, question: str, answer: str, golds: list[str]) -> list[Message]:
        """The chat the judge model sees."""
        if self.name == "deepresearcher":
            prompt = (MBE_PROMPT.replace("{question}", question)
                      .replace("{gt_answer}", str([g.lower() for g in golds]))
                      .replace("{pred_answer}", deepresearcher_normalize(answer)))
            return [{"role": "system", "content": MBE_SYSTEM}, {"role": "user", "content": prompt}]
        prompt = REARTER_PROMPT.format(question=question.strip(), golds=" | ".join(golds), answer=answer.strip())
        return [{"role": "user", "content": prompt}]

    def shown_answer(self, answer: str) -> str:
        """The answer as the prompt shows it (and the cache keys it)."""
        return deepresearcher_normalize(answer) if self.name == "deepresearcher" else answer.strip()

    def judges_empty(self) -> bool:
        """Whether an answer that normalizes to nothing still goes to the judge (the paper's script sent it)."""
        return self.name == "deepresearcher"

    def exact(self, answer: str, golds: list[str]) -> bool:
        """Whether the answer is correct without asking (equal to a gold under this prompt's normalization)."""
        if self.name == "deepresearcher":
            normalized = deepresearcher_normalize(answer)
            return any(deepresearcher_normalize(g) == normalized for g in golds)
        return bool(exact_match(answer, golds))

    def parse(self, reply: str) -> bool | None:
        return parse_mbe(reply) if self.name == "deepresearcher" else parse_verdict(reply)


JudgePromptName = Literal["deepresearcher", "rearter"]
JUDGE_PROMPTS: dict[str, JudgePrompt] = {
    "deepresearcher": JudgePrompt("deepresearcher", "dr-mbe-v2", temperature=0.7, max_tokens=512, attempts=100),
    "rearter": JudgePrompt("rearter", "dr-judge-v1", temperature=0.0, max_tokens=8, attempts=1),
}
"""The judge prompts by ``eval.judge_prompt`` name."""


class Judge:
    """Judges answers with one chat client; exact matches (and, for ReARTeR, empty answers) never reach the model."""

    def __init__(
        self, client: ChatClient, *, cache: Any = None, model_name: str | None = None,
        prompt: JudgePromptName = "deepresearcher", attempts: int | None = None,
    ) -> None:
        """``attempts`` bounds the calls per verdict of a sampling prompt (``eval.judge_attempts``); None: the
        prompt's own bound. A prompt asked at temperature 0 is asked once: its next reply would be the same."""
        self.client = client
        self.cache = cache
        self.model_name = model_name or getattr(client, "model", "") or "judge"
        self.prompt = JUDGE_PROMPTS[prompt]
        self._bound = attempts
        self.attempts = attempts if attempts and self.prompt.temperature > 0 else self.prompt.attempts

    def with_prompt(self, prompt: JudgePromptName) -> Judge:
        """The same model, cache and bound asked with another prompt; closing this judge closes both."""
        return Judge(self.client, cache=self.cache, model_name=self.model_name, prompt=prompt, attempts=self._bound)

    def messages(self, question: str, answer: str, golds: list[str]) -> list[Message]:
        """The chat the judge model sees."""
        return self.prompt.messages(question, answer, golds)

    async def _ask(self, messages: list[Message]) -> str:
        result = await self.client.chat(messages, max_tokens=self.prompt.max_tokens, temperature=self.prompt.temperature)
        return result.text

    async def _reply(self, messages: list[Message], request: dict[str, Any], attempt: int) -> str:
        if self.cache is None:
            return await self._ask(messages)
        params = {"prompt": self.prompt.version, **({"attempt": attempt} if attempt else {})}
        return await self.cache.cached("judge", self.model_name, request, params, lambda: self._ask(messages))

    async def judge(self, question: str, answer: str | None, golds: list[str]) -> Verdict:
        """The verdict on one answer (None: no answer); a failing judge model gives ``by="error"``, not an exception."""
        if answer is None or not (self.prompt.judges_empty() or normalize_answer(answer)):
            return Verdict(False, "no_answer")
        if self.prompt.exact(answer, golds):
            return Verdict(True, "exact")
        messages = self.messages(question, answer, golds)
        request = {"question": question, "answer": self.prompt.shown_answer(answer), "golds": sorted(golds)}
        reply = ""
        for attempt in range(self.attempts):
            try:
                reply = await self._reply(messages, request, attempt)
            except BackendError as exc:
                logger.warning("judge %s failed on %r: %s", self.model_name, question[:80], exc)
                return Verdict(False, "error", str(exc), asked=attempt + 1, unparsed=attempt)
            decided = self.prompt.parse(reply)
            if decided is not None:
                return Verdict(decided, "model", reply, asked=attempt + 1, unparsed=attempt)
        logger.info("judge reply without a verdict after %d attempts: %r", self.attempts, reply[:120])
        return Verdict(False, "unparsed", reply, asked=self.attempts, unparsed=self.attempts)

    async def aclose(self) -> None:
        """Close the client, and the cache if one was given (the judge owns both)."""
        await self.client.aclose()
        if self.cache is not None:
            await self.cache.aclose()
