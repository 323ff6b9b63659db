"""Build the policy named by ``agent.policy``: the generator and the tokenizer its chat template comes from.

    smollm2                     embedded SmolLM2-135M-Instruct (transformers, CPU/GPU, offline)
    /path/to/checkpoint         a local model directory (transformers)
    vllm:http://host:8000/v1    a vLLM server (token ids in and out)
    vllm:/path/or/hub-name      vLLM's AsyncLLM in this process
    openai:https://host/v1      any OpenAI-compatible completions server (text only: evaluation)
    openai-chat:https://host/v1 a chat-completions-only API (hosted models; ChatML tokenizer; evaluation)

Server policies need a local tokenizer for the chat template: ``agent.tokenizer`` (a directory, or
``qwen2.5`` for the offline Qwen2.5 vocabulary), else the model directory or name itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepresearcher.config import Config
from deepresearcher.errors import ConfigError
from deepresearcher.generate.base import Generator


def load_tokenizer(name: str, config: Config) -> Any:
    """A tokenizer by name: ``qwen2.5``, ``smollm2`` (both offline), or a directory / hub name."""
    from deepresearcher.generate import embedded

    if name == "qwen2.5":
        return embedded.load_qwen25_tokenizer(config.resolved_cache_dir())
    if name == "smollm2":
        return embedded.load_smollm2_tokenizer(config.resolved_cache_dir())
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"Cannot load tokenizer {name!r} ({exc}); set agent.tokenizer to a local directory or `qwen2.5`."
        ) from exc


def make_policy(config: Config) -> tuple[Generator, Any]:
    """The generator for ``config.agent.policy`` and its tokenizer."""
    agent = config.agent
    policy = agent.policy.strip()
    local = {"max_batch_size": agent.max_batch_size, "batch_wait_s": agent.batch_wait_ms / 1000}
    if policy == "smollm2":
        from deepresearcher.generate.transformers_gen import TransformersGenerator

        generator = TransformersGenerator.embedded(cache_dir=config.resolved_cache_dir(), **local)
        return generator, generator.tokenizer
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

        return VLLMEngineGenerator(target), tokenizer
    if Path(policy).is_dir():
        from deepresearcher.generate.transformers_gen import TransformersGenerator

        generator = TransformersGenerator.from_pretrained(policy, **local)
        return generator, generator.tokenizer
    raise ConfigError(
        f"agent.policy={policy!r} is not a policy: use `smollm2`, a model directory, `vllm:http://host:8000/v1`, "
        "`vllm:<model path>`, `openai:https://host/v1` or `openai-chat:https://host/v1`."
    )
