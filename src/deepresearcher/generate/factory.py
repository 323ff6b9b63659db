"""Build the policy named by ``agent.policy``: the generator and the tokenizer its chat template comes from.

This is the only place a policy generator is built: ``research``, ``eval`` and training (which passes
the model it is training, or its colocated vLLM engine) all come here.

    smollm2                     embedded SmolLM2-135M-Instruct (offline)
    /path/to/checkpoint         a local model directory
    local:smollm2, local:/path  either, always on the local engine
    vllm:http://host:8000/v1    a vLLM server (token ids in and out)
    vllm:/path/or/hub-name      vLLM's AsyncLLM in this process
    openai:https://host/v1      any OpenAI-compatible completions server (text only: evaluation)
    openai-chat:https://host/v1 a chat-completions-only API (hosted models; ChatML tokenizer; evaluation)

A local model (an embedded name or a directory) decodes with vLLM's in-process engine when this process runs
its models on a CUDA GPU (``inference.device``) and vLLM is installed, so ``eval`` and ``research`` run at
vLLM's speed; else with the local engine (``inference.engine``). ``local:`` keeps the local engine anywhere.

Server policies need a local tokenizer for the chat template: ``agent.tokenizer`` (a directory, or
``qwen2.5`` for the offline Qwen2.5 vocabulary), else the model directory or name itself.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

from deepresearcher.config import Config
from deepresearcher.errors import ConfigError
from deepresearcher.generate.base import Generator

logger = logging.getLogger(__name__)


def load_tokenizer(name: str, config: Config) -> Any:
    """A tokenizer by name: ``qwen2.5``, ``smollm2`` (both offline), or a directory / hub name."""
    if name == "qwen2.5":
        from deepresearcher.inference.embedded import load_qwen25_tokenizer

        return load_qwen25_tokenizer(config.resolved_cache_dir())
    from transformers import AutoTokenizer

    from deepresearcher.inference.embedded import EMBEDDED_NAMES

    if name in EMBEDDED_NAMES:
        from deepresearcher.inference.loader import resolve_checkpoint

        name = str(resolve_checkpoint(name, config.resolved_cache_dir()))
    try:
        return AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"Cannot load tokenizer {name!r} ({exc}); set agent.tokenizer to a local directory or `qwen2.5`."
        ) from exc


def make_policy(
    config: Config, *, model: Any = None, tokenizer: Any = None, vllm_llm: Any = None, seed: int = 0,
    max_batch_size: int | None = None,
) -> tuple[Generator, Any]:
    """The generator for ``config.agent.policy`` and its tokenizer.

    Training passes the policy it is training instead: ``model`` and ``tokenizer`` (sampled in this process
    with the live weights, by the local engine) or ``vllm_llm`` (TRL's colocated ``vllm.LLM``, which holds
    the same weights). ``seed`` seeds sampling; ``max_batch_size`` overrides ``agent.max_batch_size`` (a
    training step samples all its rollouts together).
    """
    agent = config.agent
    local = {"max_batch_size": max_batch_size or agent.max_batch_size, "batch_wait_s": agent.batch_wait_ms / 1000,
             "seed": seed, "cuda_graphs": None if config.runtime.cuda_graphs else False}  # None: on when on CUDA
    if vllm_llm is not None:
        from deepresearcher.generate.vllm_gen import VLLMColocatedGenerator

        return VLLMColocatedGenerator(vllm_llm, seed=seed), tokenizer
    if model is not None:  # a training step: its rows come back from their tools together; join per turn
        from deepresearcher.inference.engine import LocalEngine

        return LocalEngine(model, tokenizer, join_every=agent.max_tokens_per_turn, **local), tokenizer
    policy = agent.policy.strip()
    kind, sep, target = policy.partition(":")
    if sep and kind in ("vllm", "openai", "openai-chat") and target:
        tokenizer = load_tokenizer(agent.tokenizer or agent.policy_model or target, config)
        if kind.startswith("openai"):
            from deepresearcher.generate.openai_gen import OpenAITextGenerator

            api = "chat" if kind == "openai-chat" else "completions"
            generator = OpenAITextGenerator(
                target, tokenizer, agent.policy_model, api_key_env=agent.policy_api_key_env, api=api
            )
            return generator, tokenizer
        if target.startswith(("http://", "https://")):
            from deepresearcher.generate.vllm_gen import VLLMServerGenerator

            return VLLMServerGenerator(target, agent.policy_model, api_key_env=agent.policy_api_key_env), tokenizer
        from deepresearcher.generate.vllm_gen import VLLMEngineGenerator

        return VLLMEngineGenerator(target, seed=seed), tokenizer
    from deepresearcher.inference.embedded import EMBEDDED_NAMES

    forced_local = bool(sep) and kind == "local"
    name = target.strip() if forced_local else policy
    if name in EMBEDDED_NAMES or Path(name).is_dir():
        use_vllm, why = (False, "agent.policy says local:") if forced_local else vllm_for_local_models()
        if use_vllm:
            from deepresearcher.generate.vllm_gen import VLLMEngineGenerator
            from deepresearcher.inference.loader import resolve_checkpoint

            checkpoint = resolve_checkpoint(name, config.resolved_cache_dir())
            logger.info("agent.policy=%s: vLLM in process (%s; `local:%s` keeps the local engine)", policy, why, name)
            return VLLMEngineGenerator(str(checkpoint), seed=seed), load_tokenizer(agent.tokenizer or name, config)
        from deepresearcher.inference.engine import LocalEngine
        from deepresearcher.inference.loader import load_model

        logger.info("agent.policy=%s: the local engine (%s)", policy, why)
        model, tokenizer = load_model(name, config.resolved_cache_dir())
        return LocalEngine(model, tokenizer, **local), tokenizer
    raise ConfigError(
        f"agent.policy={policy!r} is not a policy: use `smollm2`, a model directory, `local:` + either, "
        "`vllm:http://host:8000/v1`, `vllm:<model path>`, `openai:https://host/v1` or `openai-chat:https://host/v1`."
    )


def vllm_for_local_models() -> tuple[bool, str]:
    """Whether a local ``agent.policy`` decodes with vLLM in this process, and why: only where this process runs
    its models on a CUDA GPU (``inference.device``) and vLLM imports; vLLM is not imported to find out."""
    from deepresearcher.inference import device

    if not device.on_gpu():
        return False, "models run on the CPU here"
    try:
        installed = importlib.util.find_spec("vllm") is not None
    except ValueError:  # already imported, by a module built in code (no spec): importable
        installed = True
    if not installed:
        return False, "vllm is not installed"
    return True, "a CUDA GPU and vllm are here"
