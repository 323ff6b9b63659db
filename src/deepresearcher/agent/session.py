"""One place builds what an episode needs from config: policy, chat template, episode settings, tools.

``research``, ``eval``, training and the verl agent loop all take their episodes from here, so a model
meets the same system turn, template and limits in each, and scores the same in each. Two choices are
made once, here:

- the protocol (``agent.protocol``: prompt, tool schemas, parsing, toolbox) and the system turn: the
  protocol's, or the one-line turn of a model trained with ``train.compact_prompt`` (a model trained on
  one cannot follow the other);
- the decoding: ``train`` samples at ``agent.temperature``; ``eval`` (evaluation and ``research``) at
  ``eval.temperature`` (0: greedy), as the quickstart's held-out evaluation does;
- the guide (``agent.guide``): in ``eval`` decoding, the embedded base model built from
  ``agent.policy`` gets a worked example in its system turn and guided turns; every other policy runs unguided.

Either way the episode's context budget is bounded by the policy's own window.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any, Literal

from deepresearcher.agent.guide import Guide
from deepresearcher.agent.loop import EventCallback, RolloutEngine, fit_window
from deepresearcher.agent.protocols import AgentProtocol, get_protocol
from deepresearcher.agent.template import ChatTemplate
from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import AgentConfig, Config
from deepresearcher.generate.base import Generator

Decoding = Literal["train", "eval"]

COMPACT_SYSTEM_PROMPT = "Research the question with web_search and browse_webpage, then answer."
"""The system turn of ``train.compact_prompt``: a from-scratch model learns the protocol from SFT, not from
instructions, and a one-line turn keeps every episode several hundred tokens shorter."""


def agent_protocol(config: Config) -> AgentProtocol:
    """The protocol ``agent.protocol`` names: read here only, so the template, the toolbox and every engine's
    plan agree on it."""
    return get_protocol(config.agent.protocol)


def make_template(tokenizer: Any, config: Config, *, guided: bool = False) -> ChatTemplate:
    """The agent's chat template for ``tokenizer``, ``agent.protocol`` and the system turn ``config`` trains
    and evaluates with; ``guided``: with the guide's worked example after it."""
    template = ChatTemplate(tokenizer, agent_protocol(config))
    if config.train.compact_prompt:
        template.system = COMPACT_SYSTEM_PROMPT
    if guided:
        from deepresearcher.agent.guide import worked_example

        template.system = template.system + worked_example(config)
    return template


def make_toolbox(env: Any, config: Config) -> Any:
    """The tools of ``agent.protocol`` over the environment ``env`` (a ``WebEnvironment`` or a handler client),
    with the limits ``config`` sets; the toolbox every engine's episodes call."""
    return agent_protocol(config).make_toolbox(env, config)


def episode_settings(config: Config, generator: Generator, decoding: Decoding) -> AgentConfig:
    """``config.agent`` with the decoding's temperature and a context budget that fits the policy's window."""
    agent = config.agent
    if decoding == "eval":
        agent = agent.model_copy(update={"temperature": config.eval.temperature})
    return fit_window(agent, generator)


def episode_plan(config: Config) -> dict[str, Any]:
    """What one episode runs (protocol, reward, reader, search, limits): the lines of a dry run that say which
    experiment this is, shared by both engines' plans."""
    return {
        "protocol": config.agent.protocol,
        "reward_metric": config.reward.metric,
        "reader": config.browse.reader,
        "search_backend": "env.server_urls (the handler services' own)" if config.env.server_urls
                          else config.search.backend,
        "max_turns": config.agent.max_turns,
        "max_tokens_per_turn": config.agent.max_tokens_per_turn,
        "context_budget": config.agent.context_budget,
        "temperature": config.agent.temperature,
    }


class AgentSession:
    """A policy, its template and settings, and one toolbox per environment, ready to run episodes."""

    def __init__(
        self, config: Config, generator: Generator, tokenizer: Any, toolboxes: list[Any], *, decoding: Decoding,
        guide: Guide | None = None,
    ) -> None:
        """``guide``: write each turn around what the policy samples (``agent.guide``; ``open_session`` decides)."""
        self.config = config
        self.generator = generator
        self.tokenizer = tokenizer
        self.toolboxes = toolboxes
        self.decoding = decoding
        self.guide = guide
        self.template = make_template(tokenizer, config, guided=guide is not None)
        self.settings = episode_settings(config, generator, decoding)

    def engine(
        self, *, generator: Generator | None = None, toolbox: Any = None, on_event: EventCallback | None = None,
        settings: AgentConfig | None = None,
    ) -> RolloutEngine:
        """A rollout engine of this session (another generator, e.g. a seeded view, or toolbox if given)."""
        return RolloutEngine(generator or self.generator, toolbox or self.toolboxes[0], self.template,
                             settings or self.settings, on_event=on_event, guide=self.guide)

    async def run(self, tasks: Iterable[Any], *, toolbox: Any = None, on_event: EventCallback | None = None,
                  settings: AgentConfig | None = None) -> list[Trajectory]:
        """One episode per task, all concurrently, in task order; one failing generator cancels the rest."""
        from deepresearcher.agent.loop import run_episodes

        return await run_episodes(self.engine(toolbox=toolbox, on_event=on_event, settings=settings), tasks)


@asynccontextmanager
async def open_session(
    config: Config, *, policy: tuple[Generator, Any] | None = None, decoding: Decoding = "eval"
) -> AsyncIterator[AgentSession]:
    """A session on ``config``'s policy (or ``policy``, a ``(generator, tokenizer)`` already built) and its
    environment (``make_environment``); both are closed on exit. A guided session (``agent.guide``) builds its
    policy on the local engine, the generator that constrains tokens."""
    from deepresearcher.agent.guide import guide_requested, local_policy, make_guide
    from deepresearcher.generate.factory import make_policy
    from deepresearcher.web import make_environment

    guided = guide_requested(config, decoding=decoding, policy_from_config=policy is None)
    generator, tokenizer = policy if policy is not None else make_policy(local_policy(config) if guided else config)
    try:
        guide = make_guide(generator, tokenizer, config) if guided else None
        async with make_environment(config) as env:
            toolbox = make_toolbox(env, config)
            yield AgentSession(config, generator, tokenizer, [toolbox], decoding=decoding, guide=guide)
    finally:
        await generator.aclose()
