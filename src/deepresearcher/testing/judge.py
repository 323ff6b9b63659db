"""A scripted judge for the OpenAI-compatible emulator: it reads the judge prompts and answers by a rule.

Tests of the judge reward, and the F1-versus-judge measurement of docs/reward.md, need a judge that is offline
and deterministic. ``scripted_judge()`` is an emulator responder that finds the question, golds and answer in
either judge prompt (ReARTeR's or the paper's MBE, ``reward.judge``) and replies as that prompt asks (``True``
/``False``, or the MBE JSON), deciding with ``commits_to_gold``: the answer holds a gold alias as whole tokens
(after the folded SQuAD normalization) and does not hedge (no ``or``, ``either``, ``maybe``, ``perhaps``,
``possibly``, and not both ``yes`` and ``no``). It is a strict reader's rule, not a model: it takes
"The answer is Paris." as Paris and refuses "Paris or Lyon" and "Par"; it cannot tell a paraphrase ("JFK") from
a wrong answer, which a model judge can.

Example::

    with OpenAIEmulator(responder=scripted_judge()).running() as server:
        config = load_config(overrides=["reward.metric=judge", "reward.judge.kind=openai",
                                        f"reward.judge.base_url={server.base_url}"])
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from deepresearcher.reward.metrics import cover_em, normalize_answer
from deepresearcher.testing.openai_server import Reply

__all__ = ["HEDGES", "commits_to_gold", "judge_fields", "scripted_judge"]

HEDGES = frozenset({"or", "either", "maybe", "perhaps", "possibly"})
"""Words that make an answer a hedge between candidates rather than a commitment to one."""

_REARTER = re.compile(r"Question: (?P<question>.*)\nGolden Answer: (?P<golds>.*)\nPredicted Answer: (?P<answer>.*)\n\n"
                      r"Reply with one word", re.DOTALL)
_MBE = re.compile(r"question: (?P<question>.*)\nground truth answers: (?P<golds>\[.*\])\n"
                  r"pred_answer: (?P<answer>.*)\n\nThe output should", re.DOTALL)

Rule = Callable[[str, str, Sequence[str]], bool]


def judge_fields(body: dict[str, Any]) -> tuple[str, str, str, list[str]] | None:
    """``(prompt, question, answer, golds)`` of a judge request (``prompt``: ``rearter`` or ``deepresearcher``),
    or None when the last message is neither judge prompt."""
    content = str(body["messages"][-1]["content"])
    if found := _REARTER.search(content):
        return "rearter", found["question"], found["answer"], found["golds"].split(" | ")
    if found := _MBE.search(content):
        return "deepresearcher", found["question"], found["answer"], [str(g) for g in ast.literal_eval(found["golds"])]
    return None


def commits_to_gold(question: str, answer: str, golds: Sequence[str]) -> bool:
    """The scripted judge's rule: a gold alias appears in the answer as whole tokens, and the answer does not hedge.

    >>> commits_to_gold("Capital of France?", "The answer is Paris.", ["Paris"])
    True
    >>> commits_to_gold("Capital of France?", "Paris or Lyon", ["Paris"]), commits_to_gold("Same?", "yes, no", ["yes"])
    (False, False)
    """
    tokens = set(normalize_answer(answer).split())
    hedged = bool(tokens & HEDGES) or {"yes", "no"} <= tokens
    return not hedged and bool(cover_em(answer, list(golds)))


def scripted_judge(rule: Rule = commits_to_gold) -> Callable[[dict[str, Any]], Reply]:
    """An emulator responder that judges by ``rule`` in the reply format of the prompt it was asked with; any
    other request gets a reply that is no verdict."""

    def respond(body: dict[str, Any]) -> Reply:
        fields = judge_fields(body)
        if fields is None:
            return Reply(text="I can only judge answers.")
        prompt, question, answer, golds = fields
        correct = rule(question, answer, golds)
        if prompt == "rearter":
            return Reply(text="True" if correct else "False")
        rationale = "the answer names a gold answer" if correct else "the answer does not commit to a gold answer"
        return Reply(text=json.dumps({"rationale": rationale, "judgement": "correct" if correct else "incorrect"}))

    return respond
