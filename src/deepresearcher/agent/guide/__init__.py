"""Guided decoding (``agent.guide``): a model never trained on the protocol researches through its turns.

The embedded SmolLM2-135M-Instruct, the policy of a fresh install, was never trained on the protocol: told the
turn shapes it copies their placeholders and answers ``YOUR ANSWER`` at once. Guided, it reads a worked example
in its system turn (``example``) and each of its turns is written around what it chooses (``turn``): the tags,
the call's JSON and the first words of each thought are written for it; it completes its thought, picks the
query from the question and the page to read among the search's results; and it answers by reading the notes of
the pages it opened in a short prompt of their own, picking its answer among the phrases of what it read
(``reading``). It searches before it answers, every time, and answers from what it read.

``agent.guide``: ``auto`` (the default) guides the embedded base model named by ``agent.policy`` (``smollm2``,
``local:smollm2``) when ``research`` or ``eval`` builds it, and nothing else: trained checkpoints, the
quickstart's agent, server policies, a policy handed in by a trainer, training rollouts and the original
DeepResearcher protocol run exactly as before. ``on`` guides any local policy in research and evaluation
(native protocol); ``off`` never guides.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from deepresearcher.agent.guide.example import worked_example
from deepresearcher.agent.guide.turn import Guide
from deepresearcher.config import Config
from deepresearcher.errors import ConfigError

__all__ = ["Guide", "guide_requested", "local_policy", "make_guide", "worked_example"]

logger = logging.getLogger(__name__)

_SERVER_POLICIES = ("vllm:", "openai:", "openai-chat:")


def _embedded_base(policy: str) -> bool:
    """Whether ``policy`` names the embedded base model (never trained on the protocol)."""
    from deepresearcher.inference.embedded import EMBEDDED_NAMES

    name = policy.strip()
    return name.removeprefix("local:").strip() in EMBEDDED_NAMES


def guide_requested(config: Config, *, decoding: Literal["train", "eval"], policy_from_config: bool) -> bool:
    """Whether episodes of this session are guided: never in training; ``auto`` only for the embedded base model
    that the session builds from ``agent.policy`` itself; ``on`` for a policy of the native protocol, a
    ``ConfigError`` for another protocol."""
    setting = config.agent.guide
    if setting == "off" or decoding == "train":
        return False
    if setting == "on":
        if config.agent.protocol != "native":
            raise ConfigError(f"agent.guide=on writes the native protocol's turns; agent.protocol is "
                              f"{config.agent.protocol!r}. Set agent.guide=off (or auto).")
        return True
    return (policy_from_config and _embedded_base(config.agent.policy) and config.agent.protocol == "native"
            and not config.train.compact_prompt)


def local_policy(config: Config) -> Config:
    """``config`` with a local ``agent.policy`` kept on the local engine (``local:``), the one generator that
    constrains tokens; other policies unchanged."""
    policy = config.agent.policy.strip()
    if policy.startswith((*_SERVER_POLICIES, "local:")):
        return config
    return config.model_copy(update={"agent": config.agent.model_copy(update={"policy": f"local:{policy}"})})


def make_guide(generator: Any, tokenizer: Any, config: Config) -> Guide:
    """The guide for ``generator``'s turns; a ``ConfigError`` when the generator cannot constrain tokens."""
    if not getattr(generator, "supports_constraints", False):
        raise ConfigError(
            f"agent.guide needs a policy on the local engine, which constrains tokens; agent.policy="
            f"{config.agent.policy!r} is not. Use a local model (`local:` + its name) or set agent.guide=off.")
    logger.info("agent.guide: guiding %s through the native protocol's turns", config.agent.policy)
    return Guide(tokenizer)
