"""Trained tokens that were not sampled (``agent.protocol: deepresearcher`` re-renders each tool-call turn) have no
sampling log-probabilities: TRL must neither take old log-probabilities from sampling nor correct by them.

A real GRPO step of ``LengthGroupedGRPOTrainer`` on such trajectories, with TRL's vLLM importance-sampling
correction switched on (the path where sampling logprobs enter the loss): the first step's GRPO ratio and its
importance-sampling ratio are exactly 1 on every trained token. Handing TRL 0.0 for those tokens (what a
missing logprob used to become) would weight them by exp(log p) instead.
"""

from __future__ import annotations

import asyncio
import math
import os
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from deepresearcher.agent.loop import run_rollouts
from deepresearcher.agent.protocols import get_protocol
from deepresearcher.agent.template import ChatTemplate
from deepresearcher.agent.tools import ToolOutcome
from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import load_config
from deepresearcher.generate.scripted import ScriptedGenerator
from deepresearcher.train.grpo import rollout_output

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
torch.set_num_threads(1)

CALL = ' look </think>\n<tool_call>\n{"arguments":{"query":["Vesk"]},"name":"web_search"}\n</tool_call>'


class _Toolbox:
    async def call(self, name: str, arguments: dict[str, Any], context: Any) -> ToolOutcome:
        return ToolOutcome(text="[]", raw=[])


def _trajectories(tokenizer: Any, n: int) -> list[Trajectory]:
    protocol = get_protocol("deepresearcher")
    config = load_config(overrides=["agent.protocol=deepresearcher"])
    generator = ScriptedGenerator(tokenizer, [CALL, " ok </think>\n<answer>Vesk</answer>"] * n)
    template = ChatTemplate(tokenizer, protocol)
    template.system = "Research."  # a short system turn keeps the tiny model's forward small
    return [asyncio.run(run_rollouts(["Where?"], generator, _Toolbox(), tokenizer, config.agent, template=template))[0]
            for _ in range(n)]


def test_rendered_trajectories_hand_trl_nan_where_nothing_was_sampled(qwen_tokenizer) -> None:
    (trajectory,) = _trajectories(qwen_tokenizer, 1)
    out = rollout_output([trajectory], [1.0], qwen_tokenizer.eos_token_id)
    trained = [lp for lp, m in zip(out["logprobs"][0], out["env_mask"][0], strict=True) if m]
    untrained = [lp for lp, m in zip(out["logprobs"][0], out["env_mask"][0], strict=True) if not m]
    assert trained and all(math.isnan(lp) for lp in trained)
    assert untrained and all(lp == 0.0 for lp in untrained)


class _Probe:
    """Records, inside the loss, the policy's log-probabilities next to the inputs TRL built for them."""

    def __init__(self) -> None:
        self.inputs: dict[str, Any] | None = None
        self.logps: torch.Tensor | None = None


def _one_step(qwen_tokenizer, tmp_path, nan_logprobs: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The first step's GRPO ratio and importance-sampling ratio on the trained tokens."""
    from datasets import Dataset
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig

    from deepresearcher.train.trl_trainer import LengthGroupedGRPOTrainer

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(qwen_tokenizer), hidden_size=16, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, intermediate_size=32,
                                         max_position_embeddings=2048, tie_word_embeddings=True))
    trajectories = _trajectories(qwen_tokenizer, 2)
    probe = _Probe()

    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, list[Any]]:
        out = rollout_output(trajectories, [1.0, 0.0], qwen_tokenizer.eos_token_id)
        if not nan_logprobs:
            out["logprobs"] = [[0.0] * len(ids) for ids in out["completion_ids"]]
        return out

    class Probed(LengthGroupedGRPOTrainer):
        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
            probe.inputs = inputs
            return super()._compute_loss(model, inputs)

        def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
            logps, entropies, aux = super()._get_per_token_logps_and_entropies(*args, **kwargs)
            if getattr(self, "_scored_mask", None) is not None:
                probe.logps = logps.detach()
            return logps, entropies, aux

    args = GRPOConfig(output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=2, max_steps=1,
                      learning_rate=1e-3, use_cpu=True, report_to=[], disable_tqdm=True, save_strategy="no",
                      logging_steps=1, max_completion_length=2048, bf16=False, beta=0.0, loss_type="dapo",
                      activation_checkpointing=False)
    trainer = Probed(model=model, reward_funcs=lambda prompts, completions, reward, **_: list(reward), args=args,
                     train_dataset=Dataset.from_list([{"prompt": "t"}] * 2), processing_class=qwen_tokenizer,
                     rollout_func=rollout_func)
    # TRL's vLLM path with its importance-sampling correction, the one place sampling logprobs enter the loss;
    # the rollouts come from ``rollout_func`` as in training, so only the weight sync is stood in for.
    trainer.use_vllm = True
    trainer.vllm_importance_sampling_correction = True
    trainer.vllm_importance_sampling_mode = "token_truncate"
    trainer.vllm_generation = SimpleNamespace(sync_weights=lambda: None)
    trainer._last_loaded_step = -1
    trainer.train()
    inputs, mask = probe.inputs, None
    assert inputs is not None and probe.logps is not None
    mask = (inputs["completion_mask"] * inputs["tool_mask"]).bool()
    ratio = torch.exp(probe.logps - inputs["old_per_token_logps"])[mask]
    return ratio, inputs["importance_sampling_ratio"][mask]


@pytest.mark.timeout(300)
def test_first_grpo_step_ratio_is_one_on_re_rendered_tokens(qwen_tokenizer, tmp_path) -> None:
    ratio, correction = _one_step(qwen_tokenizer, tmp_path / "nan", nan_logprobs=True)
    assert ratio.numel() > 20 and torch.equal(ratio, torch.ones_like(ratio)), "old log-probs are recomputed"
    assert torch.equal(correction, torch.ones_like(correction)), "no correction by numbers nobody sampled"
    _, wrong = _one_step(qwen_tokenizer, tmp_path / "zero", nan_logprobs=False)
    assert (wrong < 0.5).all(), "0.0 stand-ins would weight each token by its own probability"
