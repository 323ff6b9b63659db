"""The generator adapter over verl's server manager, and the agent loop's input and budget checks."""

from __future__ import annotations

import pytest

pytest.importorskip("verl", reason="the verl extra is not installed")

from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from deepresearcher.errors import ConfigError, DataError, GenerationError  # noqa: E402
from deepresearcher.generate.base import SamplingParams  # noqa: E402
from deepresearcher.integrations.verl.agent_loop import episode_budget, task_from_row  # noqa: E402
from deepresearcher.integrations.verl.generator import ServerManagerGenerator  # noqa: E402


class FixedServer:
    """verl's server-manager call, answering every request with one fixed TokenOutput."""

    def __init__(self, output: TokenOutput) -> None:
        self.output = output
        self.seen: list[tuple[str, list[int], dict]] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):  # noqa: ANN001, ANN201
        self.seen.append((request_id, prompt_ids, sampling_params))
        return self.output


async def test_turn_limits_go_to_verl_and_its_sampling_settings_stay() -> None:
    server = FixedServer(TokenOutput(token_ids=[5, 6, 7], log_probs=[-0.1, -0.2, -0.3], stop_reason="completed"))
    generator = ServerManagerGenerator(server, {"temperature": 0.0, "top_p": 1.0, "logprobs": True})
    result = await generator.generate([1, 2], SamplingParams(max_tokens=3, temperature=1.0, stop=["</answer>"]))
    await generator.generate([1, 2, 5, 6, 7, 9], SamplingParams(max_tokens=8, stop=["</answer>"]))
    (first_id, prompt, params), (second_id, _, _) = server.seen
    assert prompt == [1, 2] and first_id == second_id  # one sticky request id per episode
    assert params == {"temperature": 0.0, "top_p": 1.0, "logprobs": True, "max_tokens": 3, "stop": ["</answer>"]}
    assert result.token_ids == [5, 6, 7] and result.logprobs == [-0.1, -0.2, -0.3]
    assert result.finish_reason == "length"  # verl says "completed" either way; max_tokens tokens means the limit


async def test_a_turn_shorter_than_its_limit_finished_on_a_stop() -> None:
    generator = ServerManagerGenerator(FixedServer(TokenOutput(token_ids=[5], stop_reason="completed")), {})
    result = await generator.generate([1], SamplingParams(max_tokens=4))
    assert result.finish_reason == "stop" and result.logprobs is None


class VersionedServer:
    """verl's client as its trainer drives it: the weights version moves on between two turns of an episode."""

    def __init__(self, versions: list[int]) -> None:
        self.versions = versions

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):  # noqa: ANN001, ANN201
        version = self.versions.pop(0)
        return TokenOutput(token_ids=[5], stop_reason="completed", extra_fields={
            "global_steps": version, "min_global_steps": version, "max_global_steps": version, "num_cached_tokens": 0})


async def test_server_fields_span_the_weights_versions_of_the_episode() -> None:
    """As verl's tool agent loop keeps them: the first turn's fields, the newest ``max_global_steps``."""
    generator = ServerManagerGenerator(VersionedServer([3, 4, 4]), {})
    for _ in range(3):
        await generator.generate([1], SamplingParams(max_tokens=4))
    assert generator.server_fields == {"global_steps": 3, "min_global_steps": 3, "max_global_steps": 4,
                                       "num_cached_tokens": 0}


@pytest.mark.parametrize("output, message", [
    (TokenOutput(token_ids=[], stop_reason="aborted"), "aborted"),
    (TokenOutput(token_ids=[1, 2, 3], stop_reason="completed"), "max_tokens=2"),
    (TokenOutput(token_ids=[1], log_probs=[-0.1, -0.2], stop_reason="completed"), "2 logprobs for 1 tokens"),
])
async def test_server_failures_are_generation_errors(output: TokenOutput, message: str) -> None:
    with pytest.raises(GenerationError, match=message):
        await ServerManagerGenerator(FixedServer(output), {}).generate([1], SamplingParams(max_tokens=2))


async def test_a_turn_verl_aborted_and_did_not_resume_raises_turn_aborted_keeping_the_versions() -> None:
    """verl's client hands back an aborted turn (partial_rollout off) with part of its tokens: the turn is not
    used, and the episode's weights versions are kept for the dropped sample verl still receives."""
    from deepresearcher.integrations.verl.generator import TurnAborted

    aborted = TokenOutput(token_ids=[1, 2], stop_reason="aborted", extra_fields={
        "global_steps": 3, "min_global_steps": 3, "max_global_steps": 3})
    generator = ServerManagerGenerator(FixedServer(aborted), {})
    with pytest.raises(TurnAborted, match="did not resume"):
        await generator.generate([1], SamplingParams(max_tokens=4))
    assert generator.server_fields["min_global_steps"] == 3


def test_row_gives_question_and_gold_aliases() -> None:
    row = {"raw_prompt": [{"role": "user", "content": "Who?"}], "reward_model": {"ground_truth": "A<|answer_split|>B"},
           "extra_info": {"index": "t1"}, "data_source": "world"}
    task = task_from_row(row)
    assert (task.task_id, task.question, task.golds) == ("t1", "Who?", ["A", "B"])
    with pytest.raises(DataError, match="no user message"):
        task_from_row({"raw_prompt": [], "index": 3})


def test_episode_budget_is_bounded_by_verls_response_length() -> None:
    assert episode_budget(600, 32768, 2048, 4096) == (4696, True)
    assert episode_budget(600, 3000, 2048, 4096) == (3000, False)
    with pytest.raises(ConfigError, match="max_prompt_length"):
        episode_budget(2100, 32768, 2048, 4096)


def test_output_survives_verls_as_dict_the_path_of_its_v1_trainer() -> None:
    """verl's v1 trainer stores ``AgentLoopOutput.as_dict()``: our mask, logprobs and reward must come through."""
    from deepresearcher.agent.trajectory import Segment, ToolCallRecord, Trajectory, TurnRecord
    from deepresearcher.integrations.verl.agent_loop import to_output

    trajectory = Trajectory(
        segments=[Segment(source="prompt", token_ids=[1, 2, 3]), Segment(source="policy", token_ids=[4, 5], logprobs=[-0.5, -0.25]),
                  Segment(source="env", token_ids=[6, 7, 8]), Segment(source="policy", token_ids=[9], logprobs=[-1.0])],
        turns=[TurnRecord(text="a", tool_call=ToolCallRecord(name="web_search")), TurnRecord(text="b")],
        termination="answer",
    )
    scores = {"reward": 0.75, "f1": 0.75, "em": 0.0, "format_error": 0.0}
    server_fields = {"global_steps": 7, "min_global_steps": 6, "max_global_steps": 7}
    fields = to_output(trajectory, scores, generate_seconds=1.0, tool_seconds=0.5, server_fields=server_fields).as_dict()
    assert fields["prompts"].tolist() == [1, 2, 3] and fields["responses"].tolist() == [4, 5, 6, 7, 8, 9]
    assert fields["response_mask"].tolist() == [1, 1, 0, 0, 0, 1]
    assert fields["rollout_log_probs"].tolist() == [-0.5, -0.25, 0.0, 0.0, 0.0, -1.0]
    assert fields["rm_scores"].tolist() == [0.0, 0.0, 0.0, 0.0, 0.0, 0.75] and fields["num_turns"] == 4
    # verl's v1 trainer builds int arrays of these two each step (a missing one is None: TypeError there)
    assert (fields["extra_fields"]["min_global_steps"], fields["extra_fields"]["max_global_steps"]) == (6, 7)
    info = fields["extra_fields"]["reward_extra_info"]
    assert info["searches"] == 1.0 and info["truncated"] == 0.0 and fields["extra_fields"]["termination"] == "answer"
