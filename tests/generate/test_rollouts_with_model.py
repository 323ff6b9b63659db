"""Rollouts with a real (tiny) model: the trainer's recomputed logprobs equal the sampling logprobs.

This is the property RL needs from token-in/token-out: scoring ``all_ids`` in one forward pass gives,
on every masked-in token, the logprob the generator reported when it sampled that token in a
multi-turn episode with observations appended between turns.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from deepresearcher.agent.loop import RolloutTask, run_rollouts
from deepresearcher.agent.template import ChatTemplate
from deepresearcher.config import AgentConfig, TinyModelConfig
from deepresearcher.inference.engine import LocalEngine
from deepresearcher.quickstart.tiny_model import build_tiny_checkpoint

TEXTS = ["the capital of freedonia is fredville", "web_search browse_webpage answer think", "<tool_call>"] * 20


class Outcome:
    def __init__(self, text: str) -> None:
        self.text, self.error, self.raw = text, None, None


class NoteToolBox:
    """Any call gets a fixed observation; the random model rarely forms one, so most turns are format errors."""

    async def call(self, name, arguments, context):
        return Outcome("a note about freedonia")


async def test_recomputed_logprobs_match_sampling_logprobs(tmp_path):
    torch.set_num_threads(1)
    spec = TinyModelConfig(vocab_size=300, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2,
                           intermediate_size=64, max_positions=1024)
    path = build_tiny_checkpoint(TEXTS, tmp_path / "tiny", spec, seed=5)
    generator = LocalEngine.from_pretrained(str(path), batch_wait_s=0.02, seed=1)
    template = ChatTemplate(generator.tokenizer, system="Research, then answer.")
    cfg = AgentConfig(max_turns=3, max_tokens_per_turn=12, temperature=1.0)
    tasks = [RolloutTask(task_id=str(i), question=f"What is the capital of place {i}?") for i in range(3)]
    trajectories = await run_rollouts(tasks, generator, NoteToolBox(), generator.tokenizer, cfg,
                                      template=template, make_context=lambda q: None)
    await generator.aclose()
    assert max(generator.batches) > 1, "concurrent rollouts should have shared a batch"
    for trajectory in trajectories:
        assert trajectory.termination in {"answer", "max_turns"}
        assert any(s.source == "env" for s in trajectory.segments)
        ids = torch.tensor([trajectory.all_ids], device=generator.model.device)  # where the loader put it
        with torch.no_grad():
            logp = torch.log_softmax(generator.model(ids).logits[0, :-1].float(), -1)
        scored = logp.gather(-1, ids[0, 1:].unsqueeze(-1)).squeeze(-1)[len(trajectory.prompt_ids) - 1 :]
        mask = torch.tensor(trajectory.completion_mask, dtype=torch.bool, device=scored.device)
        sampled = torch.tensor(trajectory.completion_logprobs, device=scored.device)
        assert mask.sum() > 0
        assert torch.allclose(scored[mask], sampled[mask], atol=1e-3)
