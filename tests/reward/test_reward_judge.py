"""The judge reward (``reward.metric: judge | f1+judge``) against the loopback OpenAI-compatible emulator.

Real HTTP to a scripted judge: verdicts and the rewards made of them, a batch asked at once, replay from the cache
with zero calls, retries of failed calls, broken judge answers, and the config's errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from deepresearcher.config import Config, load_config
from deepresearcher.errors import ConfigError, ReplayMissError
from deepresearcher.reward import (
    ascore_rollouts,
    close_reward_judges,
    f1_score,
    reward_judge,
    score,
    score_rollout,
    score_rollouts,
)
from deepresearcher.testing.judge import commits_to_gold, judge_fields, scripted_judge
from deepresearcher.testing.openai_server import OpenAIEmulator, Reply

QUESTION = "Which city has the larger population, Veigrad or Wemdale?"
GOLDS = ["Wemdale"]
MBE_OK = '{"rationale": "same city", "judgement": "correct"}'


@dataclass
class _Turn:
    text: str


@dataclass
class _Rollout:
    """A trajectory as the scorer reads it: the policy's turns (after the prefilled ``<think>``) and its question."""

    turns: list[_Turn] = field(default_factory=list)
    question: str = QUESTION


def answered(answer: str, question: str = QUESTION) -> _Rollout:
    return _Rollout([_Turn(f"I compared them.</think>\n<answer>{answer}</answer>")], question)


BROKEN = _Rollout([_Turn("I never answer.</think>")])


@pytest.fixture(autouse=True)
def _fresh_judges() -> Iterator[None]:
    """Each test builds its own judges: the registry is per process."""
    close_reward_judges()
    yield
    close_reward_judges()


def judge_config(server: OpenAIEmulator, tmp_path: Path, *overrides: str) -> Config:
    return load_config(overrides=[
        "reward.metric=judge", "reward.judge.kind=openai", f"reward.judge.base_url={server.base_url}",
        "reward.judge.model=judge-emu", "reward.judge.backoff_s=0.01", f"cache_dir={tmp_path / 'cache'}", *overrides,
    ])


@pytest.mark.parametrize("prompt", ["rearter", "deepresearcher"])
def test_verdicts_become_rewards_and_only_judgeable_answers_are_asked(tmp_path: Path, prompt: str) -> None:
    """Hedged and partial answers earn 0 where F1 pays them; a verbose right answer earns 1 where F1 does not.
    An exact answer is correct without a call; a broken format is the penalty and an unanswerable task the
    abstention rule, neither asked. Both prompts of the evaluation are asked and read."""
    rollouts = [answered("Wemdale"), answered("The larger one is Wemdale."), answered("Veigrad or Wemdale"),
                answered("Wemd"), answered("Veigrad"), BROKEN, answered("I cannot find it")]
    golds = [GOLDS] * 6 + [["cannot find"]]
    with OpenAIEmulator(responder=scripted_judge()).running() as server:
        config = judge_config(server, tmp_path, f"reward.judge_prompt={prompt}")
        scored = score_rollouts(rollouts, golds, config=config.reward, judge=reward_judge(config))
        assert len(server.requests) == 4  # verbose, hedged, partial, wrong
    assert [s.reward for s in scored] == [1.0, 1.0, 0.0, 0.0, 0.0, -1.0, 1.0]
    assert [s.metrics["reward_judge"] for s in scored] == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert all(s.metrics["reward_judge_failed"] == 0.0 for s in scored)
    assert scored[2].metrics["f1"] == pytest.approx(0.5) and scored[1].metrics["f1"] < 0.5
    asked = [judge_fields(r) for r in server.requests]
    assert {(name, question) for name, question, _, _ in asked} == {(prompt, QUESTION)}
    temperature = {"rearter": 0.0, "deepresearcher": 0.7}[prompt]
    assert {(r["temperature"], r["model"]) for r in server.requests} == {(temperature, "judge-emu")}


def test_f1_plus_judge_weights_the_two(tmp_path: Path) -> None:
    """``f1+judge``: (1 - w) x F1 + w x verdict, the format penalty unchanged."""
    rollouts = [answered("Veigrad or Wemdale"), answered("The larger one is Wemdale."), BROKEN]
    with OpenAIEmulator(responder=scripted_judge()).running() as server:
        config = judge_config(server, tmp_path, "reward.metric=f1+judge", "reward.judge_weight=0.25")
        scored = score_rollouts(rollouts, [GOLDS] * 3, config=config.reward, judge=reward_judge(config))
    hedged, verbose = (f1_score(a, GOLDS) for a in ("Veigrad or Wemdale", "The larger one is Wemdale."))
    assert [s.reward for s in scored] == pytest.approx([0.75 * hedged, 0.75 * verbose + 0.25, -1.0])


def test_a_batch_is_asked_at_once_under_the_clients_cap(tmp_path: Path) -> None:
    """Eight answers are in flight together, never more than ``reward.judge.concurrency``."""
    rollouts = [answered(f"It is Wemdale, number {i}.") for i in range(8)]

    def slow(body: dict) -> Reply:
        return Reply(text=scripted_judge()(body).text, delay_s=0.2)

    with OpenAIEmulator(responder=slow).running() as server:
        config = judge_config(server, tmp_path, "reward.judge.concurrency=4")
        scored = score_rollouts(rollouts, [GOLDS] * 8, config=config.reward, judge=reward_judge(config))
        assert server.max_in_flight == 4 and len(server.requests) == 8
    assert all(s.reward == 1.0 for s in scored)


def test_the_cache_replays_verdicts_with_zero_calls(tmp_path: Path) -> None:
    """A rerun on the recorded cache (``cache.mode: replay``) asks nothing and scores the same; an answer never
    recorded stops the run with what to do, as every replay miss does."""
    rollouts = [answered("The larger one is Wemdale."), answered("Veigrad or Wemdale")]
    with OpenAIEmulator(responder=scripted_judge()).running() as server:
        first = score_rollouts(rollouts, [GOLDS] * 2, config=judge_config(server, tmp_path).reward,
                               judge=reward_judge(judge_config(server, tmp_path)))
        assert len(server.requests) == 2
        replay = judge_config(server, tmp_path, "cache.mode=replay")
        again = score_rollouts(rollouts, [GOLDS] * 2, config=replay.reward, judge=reward_judge(replay))
        assert len(server.requests) == 2
        with pytest.raises(ReplayMissError, match="judge"):
            score_rollouts([answered("Surely Wemdale")], [GOLDS], config=replay.reward, judge=reward_judge(replay))
        assert len(server.requests) == 2
    assert [s.reward for s in again] == [s.reward for s in first] == [1.0, 0.0]


def test_the_scorer_training_calls_finds_the_runs_judge(tmp_path: Path) -> None:
    """``score_rollout(trajectory, golds, config=config.reward)``, as ``train.rollout.score_trajectory`` calls it,
    asks the judge registered with the whole config (its cache) about the trajectory's own question."""
    with OpenAIEmulator(responder=scripted_judge()).running() as server:
        config = judge_config(server, tmp_path)
        judge = reward_judge(config)
        scored = score_rollout(answered("The larger one is Wemdale."), GOLDS, config=config.reward)
        assert reward_judge(config.reward) is judge and judge.judge.cache is not None
        assert (scored.reward, len(server.requests)) == (1.0, 1)
        assert score_rollout(answered("The larger one is Wemdale."), GOLDS, config=config.reward).reward == 1.0
        assert len(server.requests) == 1  # the second is the cache's
    with pytest.raises(ValueError, match="question"):
        score_rollout(answered("Wemdale!", question=""), GOLDS, config=config.reward)


def test_grpos_scorer_asks_the_runs_judge_about_the_whole_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``train.pipeline.run_grpo`` (``train``, the quickstart, ``bench train``) registers the run's judge, and the
    scorer it hands the trainer scores a step's episodes as one batch: the judge's rewards and two metrics for real
    trajectories, their verdicts recorded in the run's cache (a second scoring makes no call)."""
    import deepresearcher.train.grpo as grpo
    from deepresearcher.agent.trajectory import Trajectory, TurnRecord
    from deepresearcher.train.pipeline import run_grpo

    handed = {}
    monkeypatch.setattr(grpo, "train_grpo", lambda config, start, prompts, collect, scorer, **_: handed.update(
        scorer=scorer))
    answers = ["Veigrad or Wemdale", "The larger one is Wemdale.", "Wemdale", "Veigrad"]
    trajectories = [Trajectory(question=QUESTION, golds=GOLDS, turns=[TurnRecord(text=f"Compared.</think>\n<answer>{a}</answer>")])
                    for a in answers]
    tasks = [{"id": f"t{i}", "question": QUESTION, "golds": GOLDS, "answerable": True} for i in range(4)]
    with OpenAIEmulator(responder=scripted_judge()).running() as server:
        config = judge_config(server, tmp_path, f"train.runs_dir={tmp_path / 'runs'}")
        run_grpo(config, model=tmp_path, rollouts=SimpleNamespace(collect=None), tasks=tasks, show_progress=False)
        scores = handed["scorer"](trajectories, tasks)
        assert len(server.requests) == 3  # the exact answer needs no call
        assert handed["scorer"](trajectories, tasks) == scores and len(server.requests) == 3
    assert [(s["reward"], s["reward_judge"], s["reward_judge_failed"]) for s in scores] == [
        (0.0, 0.0, 0.0), (1.0, 1.0, 0.0), (1.0, 1.0, 0.0), (0.0, 0.0, 0.0)]
    assert scores[0]["f1"] == pytest.approx(0.5) and reward_judge(config.reward).judge.cache is not None


async def test_an_evals_record_carries_the_judge_reward(tmp_path: Path) -> None:
    """``eval``'s scorer awaits the reward's judge (the run's, with the eval's question) without an eval judge."""
    from deepresearcher.agent.trajectory import Trajectory, TurnRecord
    from deepresearcher.data.schema import QATask
    from deepresearcher.eval.runner import judge_trajectory

    task = QATask(id="q1", source="world", question=QUESTION, golds=GOLDS)
    trajectory = Trajectory(turns=[TurnRecord(text="Compared.</think>\n<answer>The larger one is Wemdale.</answer>")])
    with OpenAIEmulator(responder=scripted_judge()).running() as server:
        record = await judge_trajectory(trajectory, task, None, judge_config(server, tmp_path))
        assert judge_fields(server.requests[0])[1] == QUESTION
    assert (record["reward"], record["reward_judge"], record["judge"]) == (1.0, 1.0, None)


async def test_async_callers_keep_their_loop(tmp_path: Path) -> None:
    """``ascore_rollouts`` awaits the judge's thread from another event loop (eval's, verl's agent loop)."""
    with OpenAIEmulator(responder=scripted_judge()).running() as server:
        config = judge_config(server, tmp_path)
        scored = await ascore_rollouts([answered("The larger one is Wemdale.")], [GOLDS], config=config.reward,
                                       judge=reward_judge(config))
    assert scored[0].reward == 1.0


def test_failed_calls_are_retried_by_the_client(tmp_path: Path) -> None:
    """A 500 and a 429 (with Retry-After) are retried, as ``eval``'s judge is; the third reply decides."""
    script = [Reply(status=500), Reply(status=429, retry_after=0.01), Reply(text="True")]
    with OpenAIEmulator(script).running() as server:
        config = judge_config(server, tmp_path, "reward.judge.max_retries=2")
        (scored,) = score_rollouts([answered("Surely Wemdale")], [GOLDS], config=config.reward,
                                   judge=reward_judge(config))
        assert len(server.requests) == 3
    assert (scored.reward, scored.metrics["reward_judge_failed"]) == (1.0, 0.0)


def test_a_judge_that_keeps_failing_counts_as_incorrect_and_the_batch_goes_on(tmp_path: Path) -> None:
    """Past the client's retries the answer counts 0 and ``reward_judge_failed`` says so; the other answers score."""
    def flaky(body: dict) -> Reply:
        fields = judge_fields(body)
        return Reply(status=503) if fields and "broken" in fields[2] else scripted_judge()(body)

    with OpenAIEmulator(responder=flaky).running() as server:
        config = judge_config(server, tmp_path, "reward.judge.max_retries=1")
        judge = reward_judge(config)
        scored = score_rollouts([answered("Wemdale, broken"), answered("It is Wemdale.")], [GOLDS] * 2,
                                config=config.reward, judge=judge)
    assert [(s.reward, s.metrics["reward_judge_failed"]) for s in scored] == [(0.0, 1.0), (1.0, 0.0)]
    assert judge.counts == {"error": 1, "model": 1}


def test_a_broken_judge_answer_is_asked_again_then_counts_as_incorrect(tmp_path: Path) -> None:
    """The MBE prompt: a reply without the JSON verdict is asked again up to ``reward.judge_attempts``; then the
    answer is incorrect and counted. ReARTeR's prompt (temperature 0) is asked once."""
    script = [Reply(text="Let me think."), Reply(text=MBE_OK), *[Reply(text="no verdict here")] * 3]
    with OpenAIEmulator(script).running() as server:
        config = judge_config(server, tmp_path, "reward.judge_prompt=deepresearcher", "reward.judge_attempts=3",
                              "cache.mode='off'")
        scored = [score_rollout(answered(answer), GOLDS, config=config.reward, judge=reward_judge(config))
                  for answer in ("Surely Wemdale", "Maybe Wemdale")]  # one by one: the script is in arrival order
        assert len(server.requests) == 5
    assert [(s.reward, s.metrics["reward_judge_failed"]) for s in scored] == [(1.0, 0.0), (0.0, 1.0)]
    with OpenAIEmulator([Reply(text="~~~ }{")]).running() as server:
        config = judge_config(server, tmp_path, "reward.judge_attempts=3", "cache.mode='off'")
        (scored,) = score_rollouts([answered("Surely Wemdale")], [GOLDS], config=config.reward,
                                   judge=reward_judge(config))
        assert len(server.requests) == 1
    assert (scored.reward, scored.metrics["reward_judge_failed"]) == (0.0, 1.0)


def test_a_judge_metric_without_a_judge_says_what_to_set() -> None:
    """The config names the missing setting; the pure one-answer ``score`` names the scorer that can judge."""
    with pytest.raises(ConfigError, match=r"reward.metric=f1\+judge needs a judge model: set reward.judge"):
        load_config(overrides=["reward.metric=f1+judge"])
    with pytest.raises(ConfigError, match="judge_weight"):
        load_config(overrides=["reward.metric=f1+judge", "reward.judge.kind=embedded", "reward.judge_weight=1.5"])
    config = load_config(overrides=["reward.metric=judge", "reward.judge.kind=embedded"])
    with pytest.raises(ValueError, match="score_rollouts"):
        score("Wemdale", GOLDS, config=config.reward)


@pytest.mark.parametrize(
    ("answer", "correct"),
    [("Wemdale", True), ("The larger city is Wemdale.", True), ("Veigrad or Wemdale", False),
     ("either Wemdale", False), ("Wemd", False), ("Veigrad", False)],
)
def test_the_scripted_judges_rule(answer: str, correct: bool) -> None:
    """A gold as whole tokens, and no hedge."""
    assert commits_to_gold(QUESTION, answer, GOLDS) is correct
