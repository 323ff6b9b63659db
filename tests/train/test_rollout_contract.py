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


def test_rollouts_sample_through_the_trainers_colocated_vllm_engine(tmp_path) -> None:
    """With TRL's use_vllm (colocate), the step's episodes go to the engine TRL just loaded with the
    current weights; without it, to the in-process model. Either way the trainer's model ends in train mode."""
    from types import SimpleNamespace

    from deepresearcher.config import TrainConfig
    from deepresearcher.train.grpo import GRPORollouts
    from deepresearcher.train.run_dir import RunDir

    model = torch.nn.Linear(1, 1).train()
    calls: list[dict] = []

    def collector(batch, live_model, tokenizer, step=None, **engine):
        calls.append({"model": live_model, "step": step, **engine})
        assert not live_model.training, "rollouts sample in eval mode"
        return [_trajectory() for _ in batch]

    rollouts = GRPORollouts({"t1": {"id": "t1", "golds": ["x"]}}, collector, lambda ts, tasks: [{"reward": 0.5, "f1": 0.5} for _ in ts],
                            RunDir(tmp_path / "run"), TrainConfig(group_size=2, sample_trajectories=0),
                            SimpleNamespace(eos_token_id=99))
    engine = object()
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=4), model=model, use_vllm=True,
                              vllm_generation=SimpleNamespace(llm=engine),
                              accelerator=SimpleNamespace(unwrap_model=lambda m: m))
    out = rollouts(["t1", "t1"], trainer)
    assert calls[-1]["vllm_llm"] is engine and calls[-1]["step"] == 5 and out["reward"] == [0.5, 0.5]
    assert model.training

    rollouts(["t1", "t1"], SimpleNamespace(**{**vars(trainer), "use_vllm": False}))
    assert "vllm_llm" not in calls[-1] and calls[-1]["model"] is model


def test_the_step_logs_every_answer_metric_the_reward_can_name() -> None:
    """metrics.jsonl carries the mean of each answer metric, so a run rewarding `squad_f1` or
    `deepresearcher_f1` logs the metric it is trained on, not only F1/EM."""
    from deepresearcher.config import load_config
    from deepresearcher.reward import ANSWER_METRICS
    from deepresearcher.train.rollout import score_trajectory

    config = load_config(None, ["reward.metric=deepresearcher_f1"])
    answered = Trajectory(turns=[TurnRecord(text="The city is named in the page.\n</think>\n<answer>Paris, France</answer>")])
    wrong = Trajectory(turns=[TurnRecord(text="No idea.\n</think>\n<answer>Lyon</answer>")])
    task = {"golds": ["Paris"]}
    scores = [score_trajectory(t, task, config) for t in (answered, wrong)]
    stats = summarize([answered, wrong], scores, group_size=2)
    assert set(ANSWER_METRICS) <= set(stats)
    assert stats["deepresearcher_f1"] == stats["reward"] == scores[0]["reward"] / 2 > 0
    assert stats["em"] == 0.0 and stats["cover_em"] == 0.5 and stats["f1"] == scores[0]["f1"] / 2
