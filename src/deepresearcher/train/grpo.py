"""GRPO training on TRL's ``GRPOTrainer``, fed by our own rollout engine through ``rollout_func``.

How one optimizer step runs::

    dataset row = task id ──► TRL repeats it group_size times ──► rollout_func(prompts, trainer)
        ──► agent loop: multi-turn episodes against the real tools, sampled with the *current* weights
        ──► {prompt_ids, completion_ids, logprobs, env_mask, reward, ...}   (the trajectory's trained layout: TRL
            never re-tokenizes; env_mask = 0 on tool observations, so they add nothing to the loss)
        ──► TRL: group advantages, clipped ratio, k3 KL to the reference, entropy bonus, token-mean loss

The trainer is configured so that one generation batch is exactly one optimizer step
(``prompts_per_step x group_size`` rollouts over all processes, each process sampling its share of whole
groups and accumulating it in ``micro_batch_size`` chunks; see ``StepShape``), which keeps the update
on-policy. Everything the run writes goes to ``runs/<name>/`` (see ``run_dir``).
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from deepresearcher.agent.session import episode_plan
from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import Config, TrainConfig, dump_config
from deepresearcher.errors import ConfigError
from deepresearcher.inference import device
from deepresearcher.train import precision
from deepresearcher.train.collapse import CollapseWatch
from deepresearcher.train.loss import zero_signal_groups, zero_signal_share
from deepresearcher.train.run_dir import RunDir, read_metrics

logger = logging.getLogger(__name__)

# ``train.lr_schedule`` -> transformers' scheduler name (warmup, then constant or decay to 0 at max_steps).
LR_SCHEDULER_TYPES = {"constant": "constant_with_warmup", "cosine": "cosine", "linear": "linear"}

# (tasks, model, tokenizer, step=...) -> one trajectory per task, in order; see ``train.rollout.Rollouts.collect``.
Collector = Callable[..., list[Trajectory]]
Scorer = Callable[[list[Trajectory], list[dict[str, Any]]], list[dict[str, float]]]
"""Reward and metrics of a batch of episodes, each against its task (``train.rollout.score_trajectories``): one
call per batch, so a judge reward asks about the whole batch at once."""


def process_count() -> int:
    """Training processes of this run: ``WORLD_SIZE`` as ``accelerate launch`` (or torchrun) sets it, else 1."""
    raw = os.environ.get("WORLD_SIZE", "1")
    try:
        count = int(raw)
    except ValueError:
        raise ConfigError(f"WORLD_SIZE={raw!r} is not a number of processes; unset it or launch with accelerate.") from None
    if count < 1:
        raise ConfigError(f"WORLD_SIZE={count}: a run needs at least one process; unset it or launch with accelerate.")
    return count


@dataclass(frozen=True)
class StepShape:
    """One optimizer step across all processes: ``prompts x group_size`` rollouts, split evenly over them.

    TRL's generation batch is ``per_device_train_batch_size x processes x gradient_accumulation_steps``, so
    the per-process accumulation is the per-process rollouts over the micro-batch, not the global ones.
    """

    processes: int
    prompts: int
    group_size: int
    micro_batch_size: int

    @property
    def rollouts(self) -> int:
        return self.prompts * self.group_size

    @property
    def prompts_per_process(self) -> int:
        return self.prompts // self.processes

    @property
    def rollouts_per_process(self) -> int:
        return self.rollouts // self.processes

    @property
    def micro_batches_per_process(self) -> int:
        return self.rollouts_per_process // self.micro_batch_size


def step_shape(cfg: TrainConfig, processes: int | None = None) -> StepShape:
    """The step's shape on ``processes`` (default: ``process_count()``); shapes that do not split are refused."""
    processes = process_count() if processes is None else processes
    shape = StepShape(processes, cfg.prompts_per_step, cfg.group_size, cfg.micro_batch_size)
    if cfg.prompts_per_step % processes:
        raise ConfigError(
            f"train.prompts_per_step ({cfg.prompts_per_step}) must be divisible by the {processes} training processes, "
            f"so each samples whole groups; set it to a multiple of {processes} or launch another number of processes."
        )
    if shape.rollouts_per_process % cfg.micro_batch_size:
        raise ConfigError(
            f"train.prompts_per_step x train.group_size = {shape.rollouts} rollouts per step are "
            f"{shape.rollouts_per_process} per process on {processes} processes, which must be divisible by "
            f"train.micro_batch_size ({cfg.micro_batch_size}); set micro_batch_size to a divisor of "
            f"{shape.rollouts_per_process}."
        )
    return shape


def trainer_arguments(config: Config, run: RunDir, report_to: list[str]) -> dict[str, Any]:
    """The ``TrainingArguments`` both TRL trainers (``GRPOConfig``, ``AsyncGRPOConfig``) take from our config."""
    cfg = config.train
    shape = step_shape(cfg)
    return dict(
        output_dir=str(run.checkpoints_dir),
        num_generations=cfg.group_size,
        per_device_train_batch_size=cfg.micro_batch_size,
        gradient_accumulation_steps=shape.micro_batches_per_process,
        max_steps=cfg.max_steps,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=LR_SCHEDULER_TYPES[cfg.lr_schedule],
        warmup_steps=cfg.warmup_steps,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        activation_checkpointing=cfg.gradient_checkpointing,  # TRL's own default is on: a third more compute
        epsilon=cfg.clip_ratio,
        temperature=config.agent.temperature,
        max_completion_length=config.agent.context_budget,
        bf16=cfg.bf16,
        seed=cfg.seed,
        save_strategy="steps",
        save_steps=cfg.save_every,
        save_total_limit=cfg.keep_checkpoints,
        logging_steps=1,
        report_to=report_to,
        disable_tqdm=True,
        use_cpu=device.current().type == "cpu",  # the one device choice (runtime.device), for TRL's accelerator too
        dataloader_num_workers=0,
        log_completions=False,
    )


def grpo_args(config: Config, run: RunDir, report_to: list[str]) -> Any:
    """The ``GRPOConfig`` that implements our ``TrainConfig`` (the paper's knobs mapped onto TRL's names)."""
    from trl import GRPOConfig

    cfg = config.train
    shape = step_shape(cfg)
    args = GRPOConfig(
        **trainer_arguments(config, run, report_to),
        beta=cfg.kl_coef,
        entropy_coef=cfg.entropy_coef,
        loss_type="dapo" if cfg.loss_aggregation == "token_mean" else "grpo",
        scale_rewards="group",
        mask_truncated_completions=False,
        use_vllm=cfg.use_vllm,
        vllm_mode=cfg.vllm_mode,
        data_seed=cfg.seed,
        remove_unused_columns=False,
    )
    if args.world_size != shape.processes or args.generation_batch_size != shape.rollouts:
        raise ConfigError(
            f"accelerate runs {args.world_size} processes but WORLD_SIZE says {shape.processes}, which would make "
            f"{args.generation_batch_size} rollouts per step instead of {shape.rollouts}; launch with accelerate "
            "launch (it sets WORLD_SIZE) or unset WORLD_SIZE for one process."
        )
    return args


def _tensorboard_installed() -> bool:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class RolloutStats:
    """What the rollouts of the latest step looked like; merged into that step's metrics line."""

    values: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


class GRPORollouts:
    """The ``rollout_func`` TRL calls once per step, plus the reward function that reads its rewards.

    TRL hands over the prompts (our task ids) already repeated once per group member; we run the
    episodes with the trainer's live model, score them, and return token ids as sampled.
    """

    def __init__(
        self,
        tasks: dict[str, dict[str, Any]],
        collector: Collector,
        scorer: Scorer,
        run: RunDir,
        cfg: TrainConfig,
        tokenizer: Any,
    ) -> None:
        self.tasks = tasks
        self.collector = collector
        self.scorer = scorer
        self.run = run
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.latest = RolloutStats()
        self.trainer: Any = None  # the latest step's: its colocated vLLM serves the held-out evaluation too

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, list[Any]]:
        import torch

        start = time.perf_counter()
        self.trainer = trainer
        step = trainer.state.global_step + 1
        batch = [self.tasks[p] for p in prompts]
        model = trainer.accelerator.unwrap_model(trainer.model)
        # TRL colocate mode: the engine already holds this step's weights (TRL syncs them before calling us).
        engine = {"vllm_llm": trainer.vllm_generation.llm} if trainer.use_vllm else {}
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                trajectories = self.collector(batch, model, self.tokenizer, step=step, **engine)
        finally:
            model.train(was_training)
        scores = self.scorer(trajectories, batch)
        for t, s in zip(trajectories, scores, strict=True):
            t.metadata.update(s)
        behaviours = behaviour_metrics(trajectories, batch)
        log_to_trainer(trainer, behaviours)
        self.latest = RolloutStats({**summarize(trajectories, scores, self.cfg.group_size), **behaviours},
                                   time.perf_counter() - start)
        if self.cfg.sample_trajectories:
            self.run.write_samples(step, trajectories[: self.cfg.sample_trajectories])
        rewards = [s["reward"] for s in scores]
        dropped = zero_signal_rollouts(rewards, self.cfg.group_size) if self.cfg.drop_zero_signal_groups else None
        return rollout_output(trajectories, rewards, self.tokenizer.eos_token_id, dropped=dropped)

    @staticmethod
    def reward(prompts: list[Any], completions: list[Any], reward: list[float], **_: Any) -> list[float]:
        """TRL reward function: the outcome reward computed in the rollout, passed through."""
        return list(reward)


def zero_signal_rollouts(rewards: list[float], group_size: int) -> list[bool]:
    """Per rollout, whether its group (``group_size`` consecutive rollouts, as TRL lays them out) has all
    rewards equal: its advantages are all 0, so it adds tokens to the loss's count and nothing to its gradient."""
    import torch

    groups = zero_signal_groups(torch.tensor(rewards, dtype=torch.float64), group_size)
    return groups.repeat_interleave(group_size).tolist()


def rollout_output(trajectories: list[Trajectory], rewards: list[float], eos_id: int,
                   dropped: list[bool] | None = None) -> dict[str, list[Any]]:
    """TRL's ``rollout_func`` contract, built from trajectories without re-tokenizing anything.

    ``dropped`` rollouts (``train.drop_zero_signal_groups``) keep their ids with an all-zero mask: TRL then
    leaves them out of the loss and of the token count it divides by.

    A completion that does not end in EOS counts as truncated in TRL's logs; an episode cut off by the
    turn or context budget is exactly that, so its ids are left as they are.

    ``logprobs`` are the sampling ones where the trained token was sampled, NaN where it was not (a protocol
    that re-renders turns, ``agent.protocol: deepresearcher``). TRL uses them only for its vLLM
    importance-sampling correction, which leaves NaN tokens at ratio 1; the old log-probabilities of the
    GRPO ratio are always the trainer's own (recomputed, or the current ones when the step is on-policy).
    """
    out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "reward": []}
    for i, (t, r) in enumerate(zip(trajectories, rewards, strict=True)):
        completion = t.completion_ids
        mask = [0] * len(completion) if dropped is not None and dropped[i] else t.completion_mask
        logprobs = t.completion_logprobs
        if not completion:  # TRL cannot pad an empty completion; one masked EOS stands for "said nothing"
            completion, mask, logprobs = [eos_id], [0], [0.0]
        out["prompt_ids"].append(t.prompt_ids)
        out["completion_ids"].append(completion)
        out["logprobs"].append(logprobs)
        out["env_mask"].append(mask)
        out["reward"].append(float(r))
    return out


def summarize(trajectories: list[Trajectory], scores: list[dict[str, float]], group_size: int) -> dict[str, float]:
    """Per-step rollout metrics (documented in docs/train.md): the mean of every answer metric the scores
    carry (``reward.ANSWER_METRICS``: f1, em, ..., whichever ``reward.metric`` rewards), beside the rest."""
    import torch

    from deepresearcher.reward import ANSWER_METRICS

    n = max(len(trajectories), 1)
    rewards = torch.tensor([s["reward"] for s in scores], dtype=torch.float64)
    answers = {name: sum(s[name] for s in scores) / n for name in ANSWER_METRICS if scores and name in scores[0]}
    return {
        "rollouts": float(len(trajectories)),
        "reward": float(rewards.mean()) if len(scores) else 0.0,
        "f1": sum(s.get("f1", 0.0) for s in scores) / n,
        **answers,
        "success": sum(s.get("f1", 0.0) >= 0.999 for s in scores) / n,
        "format_error_rate": sum(s.get("format_error", 0.0) for s in scores) / n,
        "tool_calls": sum(sum(1 for turn in t.turns if turn.tool_call) for t in trajectories) / n,
        "turns": sum(len(t.turns) for t in trajectories) / n,
        "response_tokens": sum(sum(t.completion_mask) for t in trajectories) / n,
        "observation_tokens": sum(len(t.completion_mask) - sum(t.completion_mask) for t in trajectories) / n,
        "zero_signal_share": zero_signal_share(rewards, group_size) if len(scores) % group_size == 0 else float("nan"),
    }


def behaviour_metrics(trajectories: list[Trajectory], tasks: list[dict[str, Any]]) -> dict[str, float]:
    """The step's research behaviours (``eval.behaviours``) as flat numbers: ``behaviour/<rate>`` and
    ``behaviour/<rate>_n``, the episodes behind it (NaN, null in metrics.jsonl, where no episode gave a case).
    Each episode keeps its own record in ``metadata["behaviour"]`` (the run report's viewer filters by it)."""
    from deepresearcher.eval.behaviours import behaviour_rates, behaviour_record, flat_rates

    records = [behaviour_record(t, task) for t, task in zip(trajectories, tasks, strict=True)]
    for trajectory, record in zip(trajectories, records, strict=True):
        trajectory.metadata["behaviour"] = record.to_dict()
    return flat_rates(behaviour_rates(records))


def log_to_trainer(trainer: Any, values: dict[str, float]) -> None:
    """Hand ``values`` to TRL's per-step metric buffer, which its ``log()`` averages into the step's logs, so they
    reach TensorBoard with TRL's own numbers; NaN (no case this step) is left out."""
    buffer = getattr(trainer, "_metrics", None)  # TRL's trainer has it (trl_compat checks); a stand-in may not
    if buffer is None:
        return
    for name, value in values.items():
        if math.isfinite(value):
            buffer["train"][name].append(value)


class HeldOut(Protocol):
    """(live model, tokenizer, step; the trainer's colocated ``vllm.LLM`` with the same weights, or None) -> held-out
    metrics merged into that step's metrics line; see ``pipeline.run_grpo``."""

    def __call__(self, model: Any, tokenizer: Any, step: int, *, vllm_llm: Any = None) -> dict[str, float]: ...


def colocated_vllm(trainer: Any) -> Any:
    """TRL's colocated ``vllm.LLM`` holding ``trainer``'s current weights, or None when the trainer samples in
    process. The weights are loaded now if an optimizer step came since TRL last loaded them, as TRL's ``_generate``
    does before a step's rollouts (which then skips the load): an evaluation at a step's end decodes that step's
    policy, at vLLM's speed."""
    if trainer is None or not trainer.use_vllm:
        return None
    if trainer.state.global_step != trainer._last_loaded_step:
        trainer.vllm_generation.sync_weights()
        trainer._last_loaded_step = trainer.state.global_step
    return trainer.vllm_generation.llm


def _trainer_callbacks(rollouts: GRPORollouts, run: RunDir, cfg: TrainConfig, show_progress: bool,
                       held_out: HeldOut | None = None) -> list[Any]:
    """The callbacks both trainers share: held-out evaluation every ``cfg.eval_every`` steps, one metrics line a
    step (with collapse warnings, ``cfg.collapse``), checkpoint retention and progress."""
    from transformers import TrainerCallback

    class HeldOutCallback(TrainerCallback):
        """Every ``eval_every`` steps, the live policy on the held-out tasks; runs on every process (a sharded
        model's forward needs them all), before the step's metrics line is written."""

        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            import torch

            if held_out is None or not cfg.eval_every or state.global_step % cfg.eval_every:
                return
            was_training = model.training
            model.eval()
            try:
                with torch.no_grad():
                    engine = colocated_vllm(getattr(rollouts, "trainer", None))  # the asynchronous trainer's has none
                    rollouts.latest.values.update(held_out(model, rollouts.tokenizer, state.global_step, vllm_llm=engine))
            finally:
                model.train(was_training)

    class MetricsCallback(TrainerCallback):
        """One metrics.jsonl line per optimizer step: our rollout stats plus TRL's loss-side numbers; a
        warning in the log the first time the steps show a sign of collapse (``train.collapse``)."""

        def __init__(self) -> None:
            self.step_start = self.train_start = time.perf_counter()
            self.collapse = CollapseWatch(cfg.collapse, read_metrics(run.metrics_path))

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.train_start = time.perf_counter()

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.step_start = time.perf_counter()

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            if not logs or "loss" not in logs:
                return
            record: dict[str, Any] = {"step": state.global_step}
            record.update(rollouts.latest.values)
            if rollouts.latest.seconds:  # the asynchronous trainer has no rollout phase (rollout_wait_seconds instead)
                record["rollout_seconds"] = rollouts.latest.seconds
            record["step_seconds"] = time.perf_counter() - self.step_start
            record["elapsed_seconds"] = time.perf_counter() - self.train_start
            for ours, theirs in (
                ("kl", "kl"),
                ("entropy", "entropy"),
                ("loss", "loss"),
                ("policy_loss", "policy_loss"),
                ("clip_ratio", "clip_ratio/region_mean"),
                ("grad_norm", "grad_norm"),
                ("learning_rate", "learning_rate"),
                ("trl_frac_reward_zero_std", "frac_reward_zero_std"),
            ):
                if theirs in logs and logs[theirs] is not None:
                    record[ours] = float(logs[theirs])
            run.append_metrics(record)
            logger.info("step %d %s", state.global_step, {k: round(v, 4) for k, v in record.items() if isinstance(v, float)})
            for sign in self.collapse.update(record):
                logger.warning("step %d: sign of collapse: %s", sign.step, sign.message)

    callbacks: list[Any] = [HeldOutCallback(), MetricsCallback()]
    if show_progress:
        callbacks.append(_rich_progress(rollouts, cfg.max_steps))
    return callbacks


def _rich_progress(rollouts: GRPORollouts, max_steps: int) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from transformers import TrainerCallback

    class RichProgress(TrainerCallback):
        """Steps, reward, F1 and ETA on the terminal, kept out of the training loop."""

        def __init__(self) -> None:
            self.progress = Progress(
                TextColumn("GRPO"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
            )
            self.task = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.progress.start()
            self.task = self.progress.add_task("grpo", total=max_steps, completed=state.global_step, info="")

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            v = rollouts.latest.values
            info = f"reward {v.get('reward', 0):+.3f}  F1 {v.get('f1', 0):.3f}  fmt-err {v.get('format_error_rate', 0):.2f}"
            self.progress.update(self.task, completed=state.global_step, info=info)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.progress.stop()

    return RichProgress()


@dataclass
class TrainResult:
    """Where a finished run left its outputs."""

    run_dir: Path
    model_dir: Path
    steps: int
    seconds: float


def plan(config: Config, model: str | None = None) -> dict[str, Any]:
    """The resolved plan of a run, checked without loading a model (``--dry-run``)."""
    from deepresearcher.train.tasks import check_environments, eval_sources

    cfg = config.train
    shape = step_shape(cfg)
    held_out = eval_sources(config)
    check_environments(config, [*cfg.data, *held_out])
    if config.agent.temperature <= 0:
        raise ConfigError("GRPO needs sampled rollouts: set agent.temperature > 0 (the paper uses 1.0).")
    warnings = []
    if cfg.use_vllm and importlib.util.find_spec("vllm") is None:
        warnings.append("train.use_vllm is true but vllm is not installed here (pip install vllm on the GPU machine).")
    if cfg.use_vllm and not device.on_gpu():
        warnings.append("train.use_vllm expects a CUDA GPU, but models run on the CPU here (none is visible, or "
                        "runtime.device=cpu).")
    if cfg.bf16 and precision.bf16_is_emulated():
        warnings.append("train.bf16 on this CPU is emulated (no AVX512-BF16, AMX or Arm BF16) and slower than fp32: "
                        "set train.bf16=false.")
    tree: dict[str, str] = {}
    if cfg.async_grpo.enabled:  # the kernel the trie attends with, named before training starts
        from deepresearcher.train.tree_attention import choose_tree_attention

        choice = choose_tree_attention(on_gpu=device.on_gpu(), half_precision=cfg.bf16)
        tree = {"tree_attention": f"{choice.name} ({choice.reason})"}
    return {
        "run_dir": str(cfg.runs_dir / cfg.run_name),
        "model": model or cfg.model or "(quickstart tiny model)",
        "processes": shape.processes,
        "prompts_per_step": shape.prompts,
        "rollouts_per_step": shape.rollouts,
        "prompts_per_process": shape.prompts_per_process,
        "rollouts_per_process": shape.rollouts_per_process,
        "micro_batches_per_process": shape.micro_batches_per_process,
        "episode": episode_plan(config),
        "update": {"rollouts_per_update": shape.rollouts, "updates_per_step": 1},  # one on-policy update a step
        "data": [f"{s.label}={s.ratio:g} ({s.serves})" for s in cfg.data],
        "eval_data": [f"{s.label}={s.ratio:g} ({s.serves})" for s in held_out],
        "max_steps": cfg.max_steps,
        "total_rollouts": shape.rollouts * cfg.max_steps,
        "trl_loss_type": "dapo" if cfg.loss_aggregation == "token_mean" else "grpo",
        "trainer": (f"AsyncGRPOTrainer (max_staleness {cfg.async_grpo.max_staleness}; no KL, no entropy bonus)"
                    if cfg.async_grpo.enabled else "GRPOTrainer (synchronous)"),
        **tree,
        "generation": "vLLM " + cfg.vllm_mode if cfg.use_vllm else "in-process transformers",
        "device": str(device.current()),
        "tensorboard": _tensorboard_installed(),
        "config_hash": config.config_hash(),
        "warnings": warnings,
    }


def open_run(config: Config, resume: bool) -> tuple[RunDir, Path | None]:
    """The run directory with the config written, and the checkpoint to resume from (None for a fresh run, whose
    metrics file starts empty; a resumed run keeps the metrics up to its checkpoint)."""
    cfg = config.train
    run = RunDir(cfg.runs_dir / cfg.run_name)
    checkpoint = run.latest_checkpoint() if resume else None
    if resume and checkpoint is None:
        raise ConfigError(f"--resume: no checkpoint under {run.checkpoints_dir}; start the run without --resume.")
    if checkpoint is not None:
        run.truncate_metrics_after(int(checkpoint.name.split("-")[-1]))
    elif run.metrics_path.exists():
        run.metrics_path.unlink()
    run.write_config(config)
    return run, checkpoint


def train_grpo(
    config: Config,
    model_path: str | Path,
    tasks: list[dict[str, Any]],
    collector: Collector,
    scorer: Scorer,
    *,
    resume: bool = False,
    show_progress: bool = True,
    held_out: HeldOut | None = None,
) -> TrainResult:
    """Run GRPO from ``model_path`` on ``tasks`` (dicts with at least ``id``) and save the policy.

    With ``resume`` the run continues from the latest checkpoint in its run directory with the same
    data order (TRL/transformers restore optimizer, scheduler, RNG and sampler position). ``held_out``
    evaluates the live policy every ``train.eval_every`` steps.
    """
    import datasets
    from transformers import AutoTokenizer, PrinterCallback

    from deepresearcher.inference.loader import load_trainable
    from deepresearcher.train.trl_trainer import LengthGroupedGRPOTrainer

    cfg = config.train
    if cfg.max_steps < 1:
        raise ConfigError("train.max_steps is 0: set it to the number of GRPO optimizer steps (e.g. --set train.max_steps=50).")
    run, checkpoint = open_run(config, resume)
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = load_trainable(model_path)
    by_id = {str(t["id"]): t for t in tasks}
    rollouts = GRPORollouts(by_id, collector, scorer, run, cfg, tokenizer)
    report_to = ["tensorboard"] if _tensorboard_installed() else []
    if report_to:  # transformers reads the TensorBoard directory from the environment only
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(run.tensorboard_dir)
    dataset = datasets.Dataset.from_list([{"prompt": str(t["id"])} for t in tasks])
    trainer = LengthGroupedGRPOTrainer(
        model=model,
        reward_funcs=GRPORollouts.reward,
        args=grpo_args(config, run, report_to),
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollouts,
        callbacks=_trainer_callbacks(rollouts, run, cfg, show_progress, held_out),
    )
    trainer.remove_callback(PrinterCallback)  # our metrics callback and progress bar replace its dict dumps
    start = time.perf_counter()
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    trainer.save_model(str(run.model_dir))
    tokenizer.save_pretrained(str(run.model_dir))
    (run.root / "config.yaml").write_text(dump_config(config), encoding="utf-8")
    return TrainResult(run.root, run.model_dir, trainer.state.global_step, time.perf_counter() - start)
