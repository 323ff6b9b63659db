"""What ``rollout_func`` hands TRL: ids as sampled, logprobs aligned, env mask 0 exactly on observations."""

from __future__ import annotations

import torch

from deepresearcher.agent.trajectory import Segment, Trajectory, TurnRecord, ToolCallRecord
from deepresearcher.train.grpo import rollout_output, summarize


def _trajectory() -> Trajectory:
    return Trajectory(
        segments=[
            Segment(source="prompt", token_ids=[1, 2, 3]),
            Segment(source="policy", token_ids=[4, 5], logprobs=[-0.5, -0.25]),
            Segment(source="env", token_ids=[6, 7, 8]),
            Segment(source="policy", token_ids=[9], logprobs=[-1.0]),
        ],
        turns=[TurnRecord(text="a", tool_call=ToolCallRecord(name="web_search")), TurnRecord(text="b")],
    )


def test_rollout_output_keeps_tokens_and_masks_observations() -> None:
    out = rollout_output([_trajectory()], [0.75], eos_id=99)
    assert out["prompt_ids"] == [[1, 2, 3]]
    assert out["completion_ids"] == [[4, 5, 6, 7, 8, 9]]
    assert out["env_mask"] == [[1, 1, 0, 0, 0, 1]]
    assert out["logprobs"] == [[-0.5, -0.25, 0.0, 0.0, 0.0, -1.0]]
    assert out["reward"] == [0.75]


def test_empty_completion_becomes_one_masked_eos() -> None:
    """A rollout that ended before sampling anything (prompt over budget) still pads, and trains on nothing."""
    empty = Trajectory(segments=[Segment(source="prompt", token_ids=[1, 2])])
    out = rollout_output([empty], [-1.0], eos_id=99)
    assert out["completion_ids"] == [[99]] and out["env_mask"] == [[0]] and out["logprobs"] == [[0.0]]


def test_summary_counts_zero_signal_groups_and_tokens() -> None:
    trajectories = [_trajectory() for _ in range(4)]
    scores = [{"reward": r, "f1": max(r, 0.0), "format_error": float(r < 0)} for r in (1.0, 1.0, -1.0, 0.5)]
    stats = summarize(trajectories, scores, group_size=2)
    assert stats["zero_signal_share"] == 0.5
    assert stats["response_tokens"] == 3 and stats["observation_tokens"] == 3 and stats["tool_calls"] == 1
    assert stats["format_error_rate"] == 0.25 and stats["reward"] == torch.tensor([1.0, 1.0, -1.0, 0.5]).mean().item()
