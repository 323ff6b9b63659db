"""Policy generators: prompt ids in, sampled ids and logprobs out (see ``base.Generator``).

Implementations with heavy imports live in their own modules and are imported on use (local models run on
``vllm_gen.VLLMServerGenerator`` / ``VLLMEngineGenerator``,
``openai_gen.OpenAITextGenerator``; ``factory.make_policy(config)`` picks one from ``agent.policy``.
"""

from deepresearcher.generate.base import (
    FinishReason,
    GenerationResult,
    Generator,
    SamplingParams,
)
from deepresearcher.generate.scripted import ScriptedGenerator

__all__ = ["FinishReason", "GenerationResult", "Generator", "SamplingParams", "ScriptedGenerator"]
