"""Training and evaluation score a trajectory with one function: the same rollouts get the same numbers."""

from __future__ import annotations

import asyncio

import pytest

from deepresearcher.agent.trajectory import Trajectory, TurnRecord
from deepresearcher.config import load_config
from deepresearcher.data import QATask
from deepresearcher.eval.runner import read_records, run_eval
from deepresearcher.eval.runner import judge_trajectory as eval_score
from deepresearcher.train.rollout import score_trajectory as train_score


def _both(trajectory: Trajectory, question: str, golds: list[str], config, answerable: bool | None = None):
    """The eval record's scores and the training scores of one trajectory."""
    metadata = {} if answerable is None else {"answerable": answerable}
    task = QATask(id="t", source="nq", question=question, golds=golds, metadata=metadata)
    evaluated = asyncio.run(eval_score(trajectory, task, None, config))
    trained = train_score(trajectory, {"id": "t", "question": question, "golds": golds, **metadata}, config)
    return evaluated, trained


def _same(evaluated: dict, trained: dict) -> None:
    assert trained["reward"] == evaluated["reward"]
    assert trained["f1"] == evaluated["f1"] and trained["em"] == evaluated["em"]
    assert trained["format_error"] == (0.0 if evaluated["format_ok"] else 1.0)


@pytest.mark.parametrize("metric", ["f1", "deepresearcher_f1"])
def test_eval_rollouts_score_the_same_in_training(metric, policy_server, qa_file, eval_overrides, make_policy, tmp_path):
    """Real rollouts of ``run_eval`` (right, partial, wrong, never answered) rescored by the training scorer."""
    config = load_config(overrides=[*eval_overrides, f"reward.metric={metric}"])
    run_eval(config, tmp_path / "eval", data_file=qa_file, policy=make_policy())
    records = {r["question"]: r for r in read_records(tmp_path / "eval" / "trajectories.jsonl")}
    assert len(records) == 4
    for record in records.values():
        trajectory = Trajectory.model_validate(record["trajectory"])
        trained = train_score(trajectory, {"id": record["task_id"], "golds": record["golds"]}, config)
        _same(record, trained)
    # the engine's prompt ends with <think>, so well-formed turns start inside it: eval must not call them broken
    paris, dune = records["Which city is the capital of France?"], records["Who wrote the novel Dune?"]
    assert paris["format_ok"] and paris["reward"] == 1.0 and dune["format_ok"] and dune["reward"] == pytest.approx(2 / 3)
    nile = records["Which river flows through Cairo?"]
    assert not nile["format_ok"] and nile["reward"] == -1.0


CASES = [  # (turn texts as sampled after the prefilled <think>, golds, answerable)
    (["look.</think>\n<answer>Jean Paul Sartre</answer>"], ["Jean-Paul Sartre"], None),
    (["<think>again.</think>\n<answer>Paris</answer>"], ["Paris"], None),  # a second <think>: broken for both
    (["a</think>\n<answer>Lyon</answer><answer>Paris</answer>"], ["Paris"], None),  # two answers
    (["none.</think>\n<answer>Paris, or cannot find</answer>"], ["cannot find"], None),  # a hedge is no abstention
    (["none.</think>\n<answer>I cannot find the answer.</answer>"], ["Oslo"], False),
    (["a</think>\n<tool_call>{}</tool_call>", "b</think>\n<answer>The Beatles</answer>"], ["Beatles"], None),
]


@pytest.mark.parametrize("metric", ["f1", "em", "squad_f1", "deepresearcher_f1"])
@pytest.mark.parametrize(("texts", "golds", "answerable"), CASES)
def test_edge_trajectories_score_the_same(metric, texts, golds, answerable) -> None:
    """Broken formats, first-vs-last answers, hedges and abstentions: one verdict from both paths, per reward metric."""
    config = load_config(overrides=[f"reward.metric={metric}"])
    trajectory = Trajectory(turns=[TurnRecord(text=t) for t in texts])
    evaluated, trained = _both(trajectory, "q?", golds, config, answerable)
    _same(evaluated, trained)


def test_hedged_and_abstaining_answers_on_unanswerable_tasks() -> None:
    """An unanswerable task rewards only an answer that is an abstention as a whole."""
    config = load_config()
    hedge = Trajectory(turns=[TurnRecord(text="x</think>\n<answer>Paris, or cannot find</answer>")])
    abstain = Trajectory(turns=[TurnRecord(text="x</think>\n<answer>I could not find it.</answer>")])
    assert _both(hedge, "q?", ["cannot find"], config)[0]["reward"] == 0.0
    assert _both(abstain, "q?", ["Oslo"], config, answerable=False)[0]["reward"] == 1.0
