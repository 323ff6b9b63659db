"""The protocol's format check on what the policy itself wrote in a trajectory.

DeepResearcher gives −1 to a rollout whose format is broken, so the policy learns the protocol
before it learns to be right. This check is stricter than the original's (which only asks that tags
pair up; see ``reward.deepresearcher.tags_balanced``). Only the *policy's own* text is checked (tool
responses are the environment's and may quote anything), with the prefilled ``<think>`` in front of each
turn (``reward.trajectory``). A trajectory's format is fine when:

* ``<think>``/``</think>`` and ``<tool_call>``/``</tool_call>`` open and close in turn, never nested
  in each other or in themselves, and nothing is left open;
* there is exactly one ``<answer>…</answer>``, it is not empty, it comes in the last turn, and no
  tool call follows it;
* the policy never writes ``<tool_response>`` itself (that is the environment's tag: a policy that
  writes it is imitating an observation).

A missing answer is a broken format: the episode produced nothing to score.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["FormatCheck", "check_format", "extract_answer"]

_TAG = re.compile(r"<(/?)(think|tool_call|answer|tool_response)>")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


@dataclass(frozen=True)
class FormatCheck:
    """The verdict on one trajectory: ``ok``, the reason when not, and the answer text when found."""

    ok: bool
    reason: str | None = None
    answer: str | None = None


def extract_answer(text: str) -> str | None:
    """The stripped content of the last ``<answer>…</answer>`` in ``text``, or None.

    >>> extract_answer("<think>easy</think><answer> Paris </answer>")
    'Paris'
    >>> extract_answer("<think>no idea</think>") is None
    True
    """
    found = _ANSWER.findall(text)
    return found[-1].strip() if found else None


def _check_turn(text: str, turn: int) -> tuple[str | None, int]:
    """Walk one turn's tags; return (error or None, number of answer blocks)."""
    open_tag: str | None = None
    answers = 0
    for match in _TAG.finditer(text):
        closing, name = match.group(1) == "/", match.group(2)
        if name == "tool_response":
            return f"turn {turn}: the policy wrote a <tool_response> tag", answers
        if not closing:
            if open_tag is not None:
                return f"turn {turn}: <{name}> opened inside <{open_tag}>", answers
            if name == "tool_call" and answers:
                return f"turn {turn}: <tool_call> after the answer", answers
            open_tag = name
        else:
            if open_tag != name:
                return f"turn {turn}: </{name}> without a matching <{name}>", answers
            open_tag = None
            answers += name == "answer"
    if open_tag is not None:
        return f"turn {turn}: <{open_tag}> is never closed", answers
    return None, answers


def check_format(policy_texts: Sequence[str] | str) -> FormatCheck:
    """Check the policy's turns (or its whole text as one string) against the protocol.

    >>> check_format(["<think>look it up</think><tool_call>{}</tool_call>", "<think>ok</think><answer>Paris</answer>"])
    FormatCheck(ok=True, reason=None, answer='Paris')
    >>> check_format("<think>hmm<answer>Paris</answer></think>").reason
    'turn 1: <answer> opened inside <think>'
    >>> check_format("<think>I give up</think>").reason
    'no <answer>...</answer> in the trajectory'
    """
    turns = [policy_texts] if isinstance(policy_texts, str) else list(policy_texts)
    total_answers = 0
    for index, text in enumerate(turns, start=1):
        error, answers = _check_turn(text, index)
        if error:
            return FormatCheck(False, error)
        if answers and index != len(turns):
            return FormatCheck(False, f"turn {index}: answered before the last turn")
        total_answers += answers
    if total_answers == 0:
        return FormatCheck(False, "no <answer>...</answer> in the trajectory")
    if total_answers > 1:
        return FormatCheck(False, f"{total_answers} <answer> blocks; exactly one is allowed")
    answer = extract_answer(turns[-1])
    if not answer:
        return FormatCheck(False, "the <answer> block is empty")
    return FormatCheck(True, None, answer)
