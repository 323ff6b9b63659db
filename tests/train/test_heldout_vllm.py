"""Validation during training decodes where the rollouts do (with ``train.use_vllm``, TRL's colocated ``vllm.LLM``),
and an evaluation's episodes decode as one batch.

Real parts: ``pipeline.run_grpo`` (its held-out evaluation), TRL's trainer and loop, the tiny model and world. vLLM
needs a GPU, so TRL's colocate mode is stood in after construction, as TRL sets it up: ``use_vllm`` and a
``vllm_generation`` holding an ``EchoLLM`` (``testing.vllm_python``, vLLM's Python API on the CPU) whose
``sync_weights`` is recorded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from deepresearcher.config import load_config
from deepresearcher.testing.vllm_python import EchoLLM, vllm_modules
from deepresearcher.train.run_dir import read_metrics

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
torch.set_num_threads(1)


class _RecordingLLM(EchoLLM):
    """Each ``generate`` call's temperatures, in order with the weight syncs, in ``events``."""

    def __init__(self, events: list[tuple[str, Any]]) -> None:
        super().__init__()
        self.events = events

    def generate(self, prompts: list[Any], sampling_params: list[Any], use_tqdm: bool = True) -> list[Any]:
        self.events.append(("generate", {s.temperature for s in sampling_params}))
        return super().generate(prompts, sampling_params, use_tqdm)


@pytest.mark.timeout(180)
def test_validation_turns_go_through_the_colocated_vllm_with_the_steps_weights(
        tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One step with held-out evaluation at its end: the rollouts sample through the engine after TRL's sync at step
    0; the evaluation loads the step's weights into the same engine (sync at step 1), then decodes every held-out
    turn there at eval's temperature (greedy), none in process; TRL's next step would not sync again. Only the
    final evaluation, of the model saved after training, decodes in process."""
    from deepresearcher.inference import engine as local_engine
    from deepresearcher.train import heldout, trl_trainer
    from deepresearcher.train.pipeline import run_grpo

    for name, module in vllm_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    events: list[tuple[str, Any]] = []
    llm = _RecordingLLM(events)
    trainers: list[Any] = []

    class Colocated(trl_trainer.LengthGroupedGRPOTrainer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.use_vllm, self.vllm_importance_sampling_correction, self._last_loaded_step = True, False, -1
            self.vllm_generation = SimpleNamespace(
                llm=llm, sync_weights=lambda: events.append(("sync", self.state.global_step)))
            trainers.append(self)

    monkeypatch.setattr(trl_trainer, "LengthGroupedGRPOTrainer", Colocated)
    local_generate, final_evaluate = local_engine.LocalEngine.generate, heldout.evaluate

    async def in_process(self: Any, *args: Any, **kwargs: Any) -> Any:
        events.append(("in process", None))
        return await local_generate(self, *args, **kwargs)

    def final(*args: Any, **kwargs: Any) -> Any:  # the saved model's evaluation after training
        events.append(("final", None))
        return final_evaluate(*args, **kwargs)

    monkeypatch.setattr(local_engine.LocalEngine, "generate", in_process)
    monkeypatch.setattr(heldout, "evaluate", final)
    config = load_config(None, [
        f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", "search.top_k=2", "search.snippet_chars=60",
        "browse.top_passages=1", "agent.max_turns=2", "agent.max_tokens_per_turn=6", "agent.context_budget=1024",
        f"train.runs_dir={tmp_path / 'runs'}", "train.run_name=vllm", "train.group_size=2", "train.prompts_per_step=2",
        "train.micro_batch_size=2", "train.max_steps=1", "train.save_every=1", "train.sample_trajectories=0",
        "train.compact_prompt=true", "train.eval_every=1", "train.eval_tasks=3", "train.eval_per_type=0",
    ])
    result = run_grpo(config, model=tiny_model_dir, show_progress=False)

    (metrics,) = read_metrics(result.run_dir / "metrics.jsonl")
    assert "heldout_f1" in metrics and len((result.run_dir / "eval_step_00001.jsonl").read_text().splitlines()) == 3
    kinds = [kind for kind, _ in events]
    first, second, end = kinds.index("sync"), len(kinds) - 1 - kinds[::-1].index("sync"), kinds.index("final")
    assert [events[first][1], events[second][1]] == [0, 1], "the evaluation must decode the weights the step made"
    assert kinds.count("sync") == 2 and first < second < end
    rollouts, validation = events[first + 1 : second], events[second + 1 : end]
    assert rollouts and all(kind == "generate" and temps == {1.0} for kind, temps in rollouts)
    assert validation and all(kind == "generate" and temps == {0.0} for kind, temps in validation), \
        "held-out turns decode greedily through vLLM, none in process"
    assert sum(len(prompts) for prompts, _ in llm.calls[len(rollouts):]) >= 3, "each held-out episode took a turn"
    assert trainers[0]._last_loaded_step == 1, "TRL's next step must not load the same weights again"
    assert "in process" in kinds[end:], "the final evaluation of the saved model decodes in process"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("in_flight", [300, 100])
def test_an_evaluation_decodes_its_episodes_as_one_batch(in_flight: int, tiny_model_dir: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """300 held-out episodes start together: their first turns reach the engine together, as many as
    ``agent.max_concurrent_generations`` allows (no chunk of them waits for another chunk's slowest episode)."""
    from transformers import AutoTokenizer

    from deepresearcher.train.heldout import evaluate_model
    from deepresearcher.train.rollout import Rollouts, task_dict
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    for name, module in vllm_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    config = load_config(None, [
        f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", "agent.max_turns=1", "agent.max_tokens_per_turn=2",
        "agent.context_budget=1024", "train.compact_prompt=true", f"agent.max_concurrent_generations={in_flight}",
    ])
    world = [task_dict(t) for t in load_tasks(ensure_world(config), "test")]
    tasks = [{**world[i % len(world)], "id": f"t{i}"} for i in range(300)]
    llm = EchoLLM()
    rollouts = Rollouts(config, seed=0)
    try:
        result = evaluate_model(None, AutoTokenizer.from_pretrained(str(tiny_model_dir)), tasks, rollouts, config,
                                vllm_llm=llm)
    finally:
        rollouts.close()
    assert [row["id"] for row in result.rows] == [t["id"] for t in tasks]
    assert len(llm.calls[0][0]) == in_flight and sum(len(prompts) for prompts, _ in llm.calls) == 300
