"""Agent protocols: everything the policy and its tools agree on, chosen by ``agent.protocol``.

A protocol is the prompt the policy reads, the tool schemas it is shown, how its turns are parsed, which
strings end a turn, and how tool calls run and how their results are rendered. The chat template, the rollout
loop and the toolbox consult the protocol they are given; none of them branches on a protocol's name. The
settings a protocol implies (context, eval temperature) are ``deepresearcher.config.PROTOCOL_DEFAULTS``.

    native               this project's protocol (the default): its own prompt, schema-checked arguments, JSON
                         or compact observations, format errors answered with an error observation;
                         token-in/token-out (the context holds what was sampled)
    deepresearcher       the original DeepResearcher agent, byte for byte, to run its checkpoints as trained and
                         to train as it trained: its contexts re-rendered every turn, its loss mask
    deepresearcher-rag   the same agent in its RAG variant (``search_engine: rag``): one search tool and its
                         own system prompt, meant for a local index such as wiki-18 (``search.backend: local``)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from deepresearcher.agent.parsing import ParsedTurn
from deepresearcher.config import Config
from deepresearcher.errors import ConfigError
from deepresearcher.web.interface import Environment


@dataclass(frozen=True)
class AgentProtocol:
    """What one protocol fixes; see the module docstring for the registered ones."""

    name: str
    tools: list[dict[str, Any]]
    """Tool schemas (OpenAI function format) rendered into the prompt."""
    system_prompt: Callable[[dt.date | None], str]
    """The system turn for a date (None: today, UTC)."""
    user_prompt: Callable[[str], str]
    """The user turn for a question."""
    parse_turn: Callable[[str, list[dict[str, Any]]], ParsedTurn]
    """One sampled turn (after the prefilled ``<think>``) and the tools shown to an answer, a tool call or a
    format error."""
    stop: tuple[str, ...]
    """Strings that end a sampled turn (the end-of-turn token always does)."""
    make_toolbox: Callable[[Environment, Config], Any]
    """The toolbox that runs calls against an environment and renders their observations."""
    new_context: Callable[[str], Any]
    """A fresh per-rollout tool state for a question."""
    transcript: Callable[[Any, Any], Any]
    """``transcript(template, trajectory)``: the episode's record of tokens (``deepresearcher.agent.transcript``):
    what each turn reads and what is trained at the end."""
    call_at_max_turns: bool = False
    """Whether the call of the turn that reaches ``agent.max_turns`` still runs (its observation then ends the
    episode's text), as the original did; the native protocol ends the episode on that turn."""
    trains_sampled_tokens: bool = True
    """Whether the trained tokens are the sampled ones, with their sampling log-probs. False when turns are
    re-rendered and re-tokenized: trainers then recompute every old log-prob and skip rollout-vs-trainer checks."""


def _native() -> AgentProtocol:
    from deepresearcher.agent import parsing, prompts, tools
    from deepresearcher.agent.transcript import TokenTranscript

    return AgentProtocol(
        name="native",
        tools=tools.TOOL_SCHEMAS,
        system_prompt=prompts.system_prompt,
        user_prompt=prompts.user_prompt,
        parse_turn=parsing.parse_turn,
        stop=("</tool_call>", "</answer>"),
        make_toolbox=tools.ToolBox,
        new_context=lambda question: tools.ToolContext(question=question),
        transcript=TokenTranscript,
    )


def _deepresearcher(rag: bool = False) -> AgentProtocol:
    from deepresearcher.agent.protocols import deepresearcher as original
    from deepresearcher.agent.protocols.deepresearcher_tools import DeepResearcherToolBox, SearchContext
    from deepresearcher.agent.protocols.deepresearcher_transcript import RenderedTranscript

    return AgentProtocol(
        name="deepresearcher-rag" if rag else "deepresearcher",
        tools=original.TOOLS_FOR_WIKI if rag else original.TOOLS,
        system_prompt=original.rag_system_prompt if rag else original.system_prompt,
        user_prompt=original.user_prompt,
        parse_turn=original.parse_turn,
        stop=original.STOP,
        make_toolbox=DeepResearcherToolBox,
        new_context=lambda question: SearchContext(question=question),
        transcript=RenderedTranscript,
        call_at_max_turns=True,
        trains_sampled_tokens=False,
    )


_FACTORIES: dict[str, Callable[[], AgentProtocol]] = {
    "native": _native,
    "deepresearcher": _deepresearcher,
    "deepresearcher-rag": lambda: _deepresearcher(rag=True),
}


@cache
def get_protocol(name: str = "native") -> AgentProtocol:
    """The protocol registered under ``name`` (one object per name)."""
    try:
        return _FACTORIES[name]()
    except KeyError:
        raise ConfigError(f"Unknown agent.protocol {name!r}; choose one of: {', '.join(_FACTORIES)}.") from None


NATIVE = get_protocol("native")
