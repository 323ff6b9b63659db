"""Asynchronous off-policy GRPO on TRL's ``AsyncGRPOTrainer`` (``train.async_grpo.enabled``).

The synchronous trainer (``train.grpo``) waits at every step for the step's slowest rollout; with slow
tools (a live page fetch plus a reader model: under a second to a minute) that wait is most of a step.
Here rollouts never stop: TRL's trainer takes samples from a queue that our agent loop fills
(``train.async_worker.AgentRolloutWorker``), syncs its weights into the rollout engine after every
optimizer step (``EngineWeightTransfer``), and drops a sample older than ``max_staleness`` versions. Its
loss is the clipped ratio against the **sampling** log-probabilities (the policy that drew the sample, not
a recomputed one) with group advantages computed when the group finished.

What differs from the synchronous trainer, all TRL's ``AsyncGRPOTrainer`` as shipped: no reference model,
so no KL penalty (``train.kl_coef``), and no entropy bonus (``train.entropy_coef``); the token mean is taken
per micro-batch; micro-batches are packed padding-free into a prefix trie, attended by the tree attention
``train.tree_attention`` chooses (FlashAttention-3 from the local cache, flash-attn, or SDPA on any device).
A step is still ``prompts_per_step x group_size`` samples, now whichever groups finish first.

``AsyncAgentTrainer`` adds the one thing TRL keeps for its own worker only: the rollout stream's position
and the policy version in each checkpoint (``rollout_state.json``), so ``--resume`` continues the stream
from the first group the interrupted run had not trained on.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import Config, dump_config
from deepresearcher.errors import ConfigError
from deepresearcher.train.grpo import (
    HeldOut,
    RolloutStats,
    Scorer,
    TrainResult,
    _trainer_callbacks,
    open_run,
    step_shape,
    trainer_arguments,
)
from deepresearcher.train.run_dir import RunDir

logger = logging.getLogger(__name__)

ROLLOUT_STATE = "rollout_state.json"
SAMPLE_METRICS = ("reward", "f1", "success", "format_error_rate", "tool_calls", "turns", "response_tokens",
                  "observation_tokens", "zero_signal_share")
"""Per-sample metrics (``async_worker.group_samples``, with every answer metric) whose mean over a step's trained
samples TRL logs."""


def inflight_groups(config: Config) -> int:
    """Groups the worker keeps running: ``train.async_grpo.inflight_groups``, else enough for every step a sample
    may still be trained in (``(max_staleness + 1) x prompts_per_step``)."""
    cfg = config.train
    return cfg.async_grpo.inflight_groups or (cfg.async_grpo.max_staleness + 1) * cfg.prompts_per_step


def async_args(config: Config, run: RunDir, report_to: list[str]) -> Any:
    """The ``AsyncGRPOConfig`` that implements our ``TrainConfig``."""
    from trl.experimental.async_grpo import AsyncGRPOConfig

    cfg = config.train
    shape = step_shape(cfg)
    if shape.processes != 1:
        raise ConfigError("train.async_grpo runs its rollout worker in the training process, so on one process "
                          "only; unset WORLD_SIZE, or train on several GPUs with TRL's vLLM worker (bench/gpu_check.sh).")
    return AsyncGRPOConfig(
        **trainer_arguments(config, run, report_to),
        token_budget=0,  # micro-batches of micro_batch_size samples (a budget would ask a vLLM server for it)
        vllm_server_base_url=cfg.async_grpo.vllm_server_url,
        max_staleness=cfg.async_grpo.max_staleness,
        max_inflight_tasks=inflight_groups(config) * cfg.group_size,
        weight_sync_steps=1,
    )


def _trainer_class() -> type:
    from trl.experimental.async_grpo import AsyncGRPOTrainer
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    from deepresearcher.train.async_worker import AgentRolloutWorker

    class AsyncAgentTrainer(AsyncGRPOTrainer):
        """``AsyncGRPOTrainer`` that checkpoints and restores our worker's stream as TRL does for its own."""

        def _save_checkpoint(self, model: Any, trial: Any) -> None:
            if self.accelerator.is_main_process and isinstance(self.rollout_worker, AgentRolloutWorker):
                folder = Path(self._get_output_dir(trial=trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
                folder.mkdir(parents=True, exist_ok=True)
                first_untrained = next(g for g in itertools.count() if g not in self._trained_groups)
                state = {"prompt_index": self.rollout_worker.start_index + first_untrained,
                         "model_version": self.model_version}
                (folder / ROLLOUT_STATE).write_text(json.dumps(state), encoding="utf-8")
            super()._save_checkpoint(model, trial)

        def _inner_training_loop(self, *args: Any, **kwargs: Any) -> Any:
            checkpoint = kwargs.get("resume_from_checkpoint")
            if checkpoint is not None and isinstance(self.rollout_worker, AgentRolloutWorker):
                state_file = Path(checkpoint) / ROLLOUT_STATE
                if not state_file.is_file():
                    raise ConfigError(f"--resume: {checkpoint} has no {ROLLOUT_STATE}; it was not written by the "
                                      "asynchronous trainer (train.async_grpo.enabled).")
                state = json.loads(state_file.read_text(encoding="utf-8"))
                self.rollout_worker.start_index = state["prompt_index"]
                self._groups_before_resume = state["prompt_index"]
                self.model_version = state["model_version"]
                self.rollout_worker.update_model_version(self.model_version)
            return super()._inner_training_loop(*args, **kwargs)

    return AsyncAgentTrainer


class AsyncStepStats:
    """What ``grpo._trainer_callbacks`` reads of a step (``latest``, ``tokenizer``), filled from TRL's logs and the
    worker's queue instead of a ``rollout_func``."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.latest = RolloutStats()
        self.worker: Any = None

    def callback(self) -> Any:
        from transformers import TrainerCallback

        stats = self

        class FromLogs(TrainerCallback):
            """Before the metrics line is written: the step's sample metrics, staleness and trainer idle time."""

            def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                stats.latest = RolloutStats()

            def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
                from deepresearcher.reward import ANSWER_METRICS

                if not logs or "loss" not in logs:
                    return
                values = stats.latest.values
                values.update({k: float(logs[k]) for k in (*SAMPLE_METRICS, *ANSWER_METRICS) if logs.get(k) is not None})
                values["dropped_stale"] = float(logs.get("sample/dropped_stale_total") or 0.0)
                values["rollout_wait_seconds"] = float(logs.get("perf/rollout_wait_s") or 0.0)
                values["staleness_mean"] = float(logs.get("sample/staleness_mean") or 0.0)
                if stats.worker is not None:
                    values["staleness_histogram"] = {str(k): n for k, n in stats.worker.rollout_buffer.take_histogram().items()}
                    values["groups_done"] = float(stats.worker.groups_done)

        return FromLogs()


def _rollout_engine(config: Config, model_path: str | Path, tokenizer: Any) -> tuple[Any, Any]:
    """The worker's generator and the weight transfer into it. In process: a local engine over its own copy of
    the policy and ``EngineWeightTransfer``. With ``train.use_vllm``: the vLLM server at
    ``train.async_grpo.vllm_server_url`` and TRL's own NCCL transfer (``None`` makes the trainer build it)."""
    from deepresearcher.generate.factory import make_policy
    from deepresearcher.inference.loader import load_trainable
    from deepresearcher.train.async_worker import EngineWeightTransfer

    cfg = config.train
    if cfg.use_vllm:
        from deepresearcher.generate.vllm_gen import VLLMServerGenerator

        return VLLMServerGenerator(cfg.async_grpo.vllm_server_url.rstrip("/") + "/v1"), None
    # float32 like the trainer's copy, so the weights sent into it each sync are the trainer's exactly
    model = load_trainable(model_path).eval()
    engine, _ = make_policy(config, model=model, tokenizer=tokenizer, seed=cfg.seed,
                            max_batch_size=inflight_groups(config) * cfg.group_size)
    return engine, EngineWeightTransfer(engine)


def train_async_grpo(
    config: Config,
    model_path: str | Path,
    tasks: list[dict[str, Any]],
    rollouts: Any,
    scorer: Scorer,
    *,
    resume: bool = False,
    show_progress: bool = True,
    held_out: HeldOut | None = None,
) -> TrainResult:
    """``train_grpo``'s asynchronous twin: the same inputs (``rollouts`` is a ``train.rollout.Rollouts``; the
    worker runs on a sibling of it), the same run directory, metrics.jsonl and resume."""
    import datasets
    from transformers import AutoTokenizer, PrinterCallback

    from deepresearcher.train.tree_attention import install_tree_attention, plain_attention, unknown_peak_flops_on_cpu
    from deepresearcher.train.async_worker import AgentRolloutWorker
    from deepresearcher.train.grpo import _tensorboard_installed

    cfg = config.train
    if cfg.max_steps < 1:
        raise ConfigError("train.max_steps is 0: set it to the number of GRPO optimizer steps (e.g. --set train.max_steps=50).")
    if cfg.kl_coef or cfg.entropy_coef:
        logger.warning("train.async_grpo: TRL's AsyncGRPOTrainer has no reference model and no entropy bonus; "
                       "train.kl_coef=%g and train.entropy_coef=%g are not applied.", cfg.kl_coef, cfg.entropy_coef)
    unknown_peak_flops_on_cpu()
    run, checkpoint = open_run(config, resume)
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    engine, transfer = _rollout_engine(config, model_path, tokenizer)
    worker_rollouts = rollouts.sibling()
    worker = AgentRolloutWorker(config, worker_rollouts, tasks, engine, tokenizer, scorer,
                                inflight_groups=inflight_groups(config))
    stats = AsyncStepStats(tokenizer)
    stats.worker = worker
    report_to = ["tensorboard"] if _tensorboard_installed() else []
    if report_to:
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(run.tensorboard_dir)

    def held_out_plain(model: Any, tok: Any, step: int, *, vllm_llm: Any = None) -> dict[str, float]:
        assert held_out is not None
        with plain_attention(model):
            return held_out(model, tok, step, vllm_llm=vllm_llm)

    trainer = _trainer_class()(
        model=str(model_path),
        args=async_args(config, run, report_to),
        train_dataset=datasets.Dataset.from_list([{"prompt": str(t["id"])} for t in tasks]),
        processing_class=tokenizer,
        callbacks=[stats.callback(), *_trainer_callbacks(stats, run, cfg, show_progress,  # type: ignore[arg-type]
                                                         held_out_plain if held_out else None)],
        rollout_worker=worker,
        weight_transfer=transfer,
    )
    install_tree_attention(half_precision=cfg.bf16)
    trainer.remove_callback(PrinterCallback)
    start = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    finally:
        worker.stop()
        worker_rollouts.close()
    trainer.save_model(str(run.model_dir))
    tokenizer.save_pretrained(str(run.model_dir))
    (run.root / "config.yaml").write_text(dump_config(config), encoding="utf-8")
    return TrainResult(run.root, run.model_dir, trainer.state.global_step, time.perf_counter() - start)

