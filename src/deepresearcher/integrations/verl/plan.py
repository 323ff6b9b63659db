"""Our config as verl's: the run files, the Hydra overrides, verl's own validation, and the plan we print.

``deepresearcher train --engine verl`` writes, under ``runs/<run_name>/verl/``::

    train.parquet / val.parquet   the GRPO prompts and held-out tasks (data.verl format)
    deepresearcher.yaml           our resolved config: what every agent-loop worker loads
    agent_loop.yaml               registers ``deepresearcher`` → DeepResearcherAgentLoop with that path
    verl.yaml                     verl's whole config (ppo_trainer + our overrides), as validated
    metrics.jsonl, tensorboard/   what verl logs each step; checkpoints/ its checkpoints

How our knobs map (everything else is verl's default, or ``train.verl.overrides``):

    train.prompts_per_step   data.train_batch_size        train.group_size   rollout.n
    train.learning_rate      actor.optim.lr               train.kl_coef      actor.kl_loss_coef (low_var_kl = k3)
    train.clip_ratio         actor.clip_ratio             train.entropy_coef actor.entropy_coeff
    train.loss_aggregation   actor.loss_agg_mode          agent.temperature  rollout.temperature
    train.micro_batch_size   *_micro_batch_size_per_gpu   train.max_steps    trainer.total_training_steps
    train.eval_every         trainer.test_freq (0: -1)    train.eval_data    data.val_files
    train.weight_decay       actor.optim.weight_decay     agent.top_p        rollout.top_p
    agent.context_budget     prompt_length + response_length (train.verl.max_prompt_length + the rest),
                             and rollout.max_model_len
    train.verl.sequence_parallel_size  actor.ulysses_sequence_parallel_size (the reference follows it)
    train.verl.param_offload / optimizer_offload  actor and ref fsdp_config.param_offload / actor optimizer_offload

``train.verl.ppo_mini_batch_size`` null (the default) makes one update per step of all its rollouts, as
the original DeepResearcher trained (its ``ppo_mini_batch_size=4096`` = 256 prompts x 16).

``train.verl.mode`` picks verl's config file and entry point (``MODES``): ``sync`` is ``ppo_trainer`` under
``main_ppo``'s ``TaskRunnerV1``; ``one_step_off`` and ``fully_async`` are verl's own recipes, composed
from their own YAML (which inherits ``ppo_trainer``) with the same overrides plus the mode's
(``mode_overrides``): rollout on its own GPUs (``rollout.nnodes``, ``rollout.n_gpus_per_node``, no hybrid
engine) and, for ``fully_async``, one prompt group per rollout sample (``data.train_batch_size=0``,
``gen_batch_size=1``), our agent loop for every sample (``multi_turn.enable``), and ``async_training.*``::

    train.verl.staleness_threshold          async_training.staleness_threshold
    train.verl.trigger_parameter_sync_step  async_training.trigger_parameter_sync_step (null: updates per step)
    train.verl.partial_rollout              async_training.partial_rollout
    train.max_steps                         rollout.total_rollout_steps = steps x updates per step x mini-batch

The plan (``describe``) needs nothing installed; ``compose`` and ``validate`` need verl.
"""

from __future__ import annotations

import contextlib
import math
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepresearcher.config import Config, dump_config
from deepresearcher.errors import ConfigError
from deepresearcher.agent.session import agent_protocol, episode_plan

AGENT_LOOP_CLASS = "deepresearcher.integrations.verl.agent_loop.DeepResearcherAgentLoop"
AGENT_NAME = "deepresearcher"  # the name agent_loop.yaml registers DeepResearcherAgentLoop under


@dataclass(frozen=True)
class Mode:
    """One of verl's training modes: the module whose ``config/`` holds its Hydra config, and that config."""

    module: str
    config_name: str
    entry_point: str
    driver: str  # the Ray actor that runs the training loop

    @property
    def asynchronous(self) -> bool:
        return self.config_name != "ppo_trainer"


MODES = {
    "sync": Mode("verl.trainer.main_ppo", "ppo_trainer", "verl.trainer.main_ppo.run_ppo", "TaskRunnerV1"),
    "one_step_off": Mode("verl.experimental.one_step_off_policy.main_ppo", "one_step_off_ppo_trainer",
                         "verl.experimental.one_step_off_policy.main_ppo.main", "OneStepTaskRunner"),
    "fully_async": Mode("verl.experimental.fully_async_policy.fully_async_main", "fully_async_ppo_trainer",
                        "verl.experimental.fully_async_policy.fully_async_main.main", "FullyAsyncTaskRunner"),
}


@dataclass(frozen=True)
class RunFiles:
    """Where one verl run's generated files live."""

    root: Path

    @property
    def train_parquet(self) -> Path:
        return self.root / "train.parquet"

    @property
    def val_parquet(self) -> Path:
        return self.root / "val.parquet"

    @property
    def config_yaml(self) -> Path:
        return self.root / "deepresearcher.yaml"

    @property
    def agent_loop_yaml(self) -> Path:
        return self.root / "agent_loop.yaml"

    @property
    def verl_yaml(self) -> Path:
        return self.root / "verl.yaml"

    @property
    def metrics_jsonl(self) -> Path:
        """verl's per-step metrics (its ``file`` logger), one JSON object per line."""
        return self.root / "metrics.jsonl"

    @classmethod
    def of(cls, config: Config) -> RunFiles:
        return cls((config.train.runs_dir / config.train.run_name / "verl").absolute())


def response_length(config: Config) -> int:
    """Tokens verl leaves for the response: the episode budget minus the padded prompt."""
    length = config.agent.context_budget - config.train.verl.max_prompt_length
    if length < config.agent.min_turn_tokens:
        raise ConfigError(f"agent.context_budget ({config.agent.context_budget}) leaves {length} tokens after "
                          f"train.verl.max_prompt_length ({config.train.verl.max_prompt_length}); raise the budget.")
    return length


def _shapes(config: Config) -> dict[str, int]:
    """Batch shapes of one step, checked the way verl will check them, with fix-it messages.

    ``dp``: data-parallel ranks, the GPUs divided by the sequence-parallel size (a group of ``sp`` GPUs
    shares each sequence); an update's rollouts are split evenly over them."""
    cfg, verl = config.train, config.train.verl
    if cfg.drop_zero_signal_groups:
        raise ConfigError("train.drop_zero_signal_groups is a TRL-engine option: verl's ppo_trainer trains every "
                          "group. Unset it, or pass verl's own filtering through train.verl.overrides.")
    gpus = verl.nnodes * verl.gpus_per_node
    mini = verl.ppo_mini_batch_size or cfg.prompts_per_step
    rollouts = cfg.prompts_per_step * cfg.group_size
    if cfg.prompts_per_step % mini:
        raise ConfigError(f"train.prompts_per_step ({cfg.prompts_per_step}) must be a multiple of "
                          f"train.verl.ppo_mini_batch_size ({mini}).")
    if gpus % verl.sequence_parallel_size:
        raise ConfigError(f"train.verl.sequence_parallel_size ({verl.sequence_parallel_size}) must divide the "
                          f"{gpus} GPUs (train.verl.nnodes x gpus_per_node).")
    dp = gpus // verl.sequence_parallel_size
    if (mini * cfg.group_size) % dp:
        raise ConfigError(f"An update holds {mini} prompts x {cfg.group_size} rollouts = {mini * cfg.group_size}, which "
                          f"{dp} data-parallel ranks ({gpus} GPUs (train.verl.nnodes x gpus_per_node) / "
                          f"sequence_parallel_size {verl.sequence_parallel_size}) cannot share evenly; change one of them.")
    rollout_gpus, rollout_key = ((verl.rollout_gpus_per_node, "rollout_gpus_per_node") if MODES[verl.mode].asynchronous
                                 else (verl.gpus_per_node, "gpus_per_node"))
    if rollout_gpus % verl.tensor_parallel_size:
        raise ConfigError(f"train.verl.tensor_parallel_size ({verl.tensor_parallel_size}) must divide "
                          f"train.verl.{rollout_key} ({rollout_gpus}).")
    per_rank = mini * cfg.group_size // dp
    micro = min(cfg.micro_batch_size, per_rank)
    return {"gpus": gpus, "dp": dp, "mini": mini, "rollouts": rollouts, "per_rank_update": per_rank, "micro": micro,
            "updates": cfg.prompts_per_step // mini}


def overrides(config: Config, files: RunFiles, model: str, *, resume: bool = False) -> list[str]:
    """verl's Hydra overrides for this run (applied to its ``ppo_trainer`` config); with ``resume`` verl
    continues from the latest checkpoint under ``files.root / "checkpoints"``."""
    cfg, verl = config.train, config.train.verl
    shapes = _shapes(config)
    micro = shapes["micro"]
    actor, rollout, ref = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.ref"
    return [
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=false",
        f"data.train_files={files.train_parquet}",
        f"data.val_files={files.val_parquet}",
        "data.prompt_key=prompt",
        f"data.train_batch_size={cfg.prompts_per_step}",
        f"data.max_prompt_length={verl.max_prompt_length}",
        f"data.max_response_length={response_length(config)}",
        "data.return_raw_chat=true",
        "data.filter_overlong_prompts=false",
        f"data.seed={cfg.seed}",
        f"actor_rollout_ref.model.path={model}",
        f"actor_rollout_ref.model.enable_gradient_checkpointing={str(cfg.gradient_checkpointing).lower()}",
        f"{actor}.optim.lr={cfg.learning_rate}",
        f"{actor}.optim.lr_warmup_steps={cfg.warmup_steps}",
        f"{actor}.optim.weight_decay={cfg.weight_decay}",
        f"{actor}.grad_clip={cfg.max_grad_norm}",
        f"{actor}.ppo_mini_batch_size={shapes['mini']}",
        f"{actor}.ppo_micro_batch_size_per_gpu={micro}",
        f"{actor}.clip_ratio={cfg.clip_ratio}",
        f"{actor}.use_kl_loss={str(cfg.kl_coef > 0).lower()}",
        f"{actor}.kl_loss_coef={cfg.kl_coef}",
        f"{actor}.kl_loss_type=low_var_kl",
        f"{actor}.entropy_coeff={cfg.entropy_coef}",
        f"{actor}.loss_agg_mode={'token-mean' if cfg.loss_aggregation == 'token_mean' else 'seq-mean-token-mean'}",
        f"{actor}.ulysses_sequence_parallel_size={verl.sequence_parallel_size}",  # the reference follows it
        f"{actor}.fsdp_config.param_offload={str(verl.param_offload).lower()}",
        f"{actor}.fsdp_config.optimizer_offload={str(verl.optimizer_offload).lower()}",
        f"{ref}.fsdp_config.param_offload={str(verl.param_offload).lower()}",
        f"{ref}.log_prob_micro_batch_size_per_gpu={micro}",
        f"{rollout}.name={verl.rollout_engine}",
        f"{rollout}.mode=async",
        f"{rollout}.n={cfg.group_size}",
        f"{rollout}.temperature={config.agent.temperature}",
        f"{rollout}.top_p={config.agent.top_p}",
        # Sampling log-probs only where the trained tokens are the sampled ones (verl then logs their drift).
        f"{rollout}.calculate_log_probs={str(agent_protocol(config).trains_sampled_tokens).lower()}",
        f"{rollout}.log_prob_micro_batch_size_per_gpu={micro}",
        f"{rollout}.tensor_model_parallel_size={verl.tensor_parallel_size}",
        f"{rollout}.gpu_memory_utilization={verl.gpu_memory_utilization}",
        f"{rollout}.max_model_len={config.agent.context_budget}",
        f"{rollout}.agent.num_workers={verl.agent_workers}",
        f"{rollout}.agent.default_agent_loop={AGENT_NAME}",
        f"{rollout}.agent.agent_loop_config_path={files.agent_loop_yaml}",
        f"trainer.nnodes={verl.nnodes}",
        f"trainer.n_gpus_per_node={verl.gpus_per_node}",
        f"trainer.total_training_steps={cfg.max_steps}",
        f"trainer.save_freq={cfg.save_every}",
        f"trainer.max_actor_ckpt_to_keep={cfg.keep_checkpoints}",
        f"trainer.test_freq={cfg.eval_every or -1}",
        "trainer.val_before_train=false",
        "trainer.critic_warmup=0",
        "trainer.logger=[console,tensorboard,file]",
        f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={files.metrics_jsonl}",
        f"+ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR={files.root / 'tensorboard'}",
        *([f"+ray_kwargs.ray_init.address={verl.ray_address}"] if verl.ray_address else []),
        "trainer.project_name=deepresearcher",
        f"trainer.experiment_name={cfg.run_name}",
        f"trainer.default_local_dir={files.root / 'checkpoints'}",
        f"trainer.resume_mode={'auto' if resume else 'disable'}",
        *mode_overrides(config),
        *verl.overrides,
    ]


def sync_every(config: Config) -> int:
    """fully_async: optimizer updates per weights version (``trigger_parameter_sync_step``)."""
    return config.train.verl.trigger_parameter_sync_step or _shapes(config)["updates"]


def mode_overrides(config: Config) -> list[str]:
    """What ``train.verl.mode`` adds to the shared overrides (nothing for ``sync``).

    Both asynchronous modes serve rollouts from their own GPUs and need the sampling log-probs
    (``calculate_log_probs``: verl's rollouter refuses to start without them). Where the trained tokens are
    the sampled ones, they are the old policy (verl's ``bypass_mode``, the recipes' default); where our
    protocol re-renders the episode (``agent.protocol: deepresearcher``) they belong to other tokens, so the
    trainer recomputes the old log-probs instead (verl's non-bypass path: the weights at the start of the
    weights version)."""
    verl = config.train.verl
    if not MODES[verl.mode].asynchronous:
        return []
    sampled = str(agent_protocol(config).trains_sampled_tokens).lower()
    rollout = "actor_rollout_ref.rollout"
    out = [
        "actor_rollout_ref.hybrid_engine=false",
        f"rollout.nnodes={verl.rollout_nnodes}",
        f"rollout.n_gpus_per_node={verl.rollout_gpus_per_node}",
        f"{rollout}.calculate_log_probs=true",
        f"algorithm.rollout_correction.bypass_mode={sampled}",
    ]
    if verl.mode == "fully_async":
        cfg, every = config.train, sync_every(config)
        mini = _shapes(config)["mini"]
        out += [
            "data.train_batch_size=0",  # the rollouter feeds one prompt (and its group) at a time
            "data.gen_batch_size=1",
            f"{rollout}.multi_turn.enable=true",  # else verl's rollouter runs its single_turn_agent, not ours
            f"rollout.n={cfg.group_size}",
            f"rollout.total_rollout_steps={cfg.max_steps * every * mini}",
            f"async_training.staleness_threshold={verl.staleness_threshold}",
            f"async_training.trigger_parameter_sync_step={every}",
            f"async_training.partial_rollout={str(verl.partial_rollout).lower()}",
            "async_training.require_batches=1",
            f"actor_rollout_ref.actor.use_rollout_log_probs={sampled}",  # a key of fully_async's YAML only
        ]
    return out


def check_task_counts(config: Config, train_tasks: int, val_tasks: int) -> None:
    """Refuse data verl cannot take a step on: its train loader drops a last partial batch of
    ``train.prompts_per_step`` prompts (fewer prompts: no batch at all, and step 1 raises ``StopIteration``),
    and it builds a validation loader of every held-out task even when it never validates."""
    cfg = config.train
    sources = ", ".join(s.label for s in cfg.data)
    if train_tasks < cfg.prompts_per_step:
        raise ConfigError(
            f"train.data ({sources}) gives {train_tasks} GRPO prompts, but one verl step takes "
            f"train.prompts_per_step = {cfg.prompts_per_step} and verl drops a partial batch, so there would be no "
            "step at all. Train on more questions (the paper's mix: train.data of configs/paper-qwen2.5-7b.yaml, or "
            "--data data/train.parquet) or lower train.prompts_per_step"
            + (" (the world keeps train.sft.num_tasks of its tasks for SFT: lower that too)." if any(
                s.kind == "world" for s in cfg.data) else "."))
    if val_tasks == 0:
        raise ConfigError("There are no held-out tasks for verl's validation set (verl builds it even when it never "
                          "validates): set train.eval_data, e.g. {kind: benchmark, name: deepresearcher, split: dev} "
                          "(the original's dev.parquet).")


def write_run_files(config: Config, files: RunFiles) -> dict[str, int]:
    """Write the parquet data, our resolved config and the agent loop registration; returns task counts."""
    import yaml

    from deepresearcher.data.schema import QATask
    from deepresearcher.data.verl import write_verl_parquet
    from deepresearcher.train.tasks import task_sets

    if config.train.num_worlds != 1:
        raise ConfigError("--engine verl trains on one world (or handler fleet): set train.num_worlds=1.")
    sets = task_sets(config)

    def qa(task: dict[str, Any], split: str) -> QATask:
        return QATask(id=str(task["id"]), source=task.get("source") or "world", question=task["question"],
                      golds=task["golds"], split=split)

    check_task_counts(config, len(sets.grpo), len(sets.test))
    files.root.mkdir(parents=True, exist_ok=True)
    write_verl_parquet([qa(t, "train") for t in sets.grpo], files.train_parquet)
    write_verl_parquet([qa(t, "test") for t in sets.test], files.val_parquet)
    files.config_yaml.write_text(dump_config(config), encoding="utf-8")
    registration = [{"name": AGENT_NAME, "_target_": AGENT_LOOP_CLASS, "deepresearcher_config": str(files.config_yaml)}]
    files.agent_loop_yaml.write_text(yaml.safe_dump(registration, sort_keys=False), encoding="utf-8")
    return {"train_tasks": len(sets.grpo), "val_tasks": len(sets.test)}


def compose(override_list: list[str], mode: str = "sync") -> Any:
    """verl's config file for ``mode`` (``MODES``) with ``override_list`` applied (Hydra refuses unknown keys).

    The asynchronous recipes' YAML inherits ``ppo_trainer`` through a search path; one_step_off's names it
    relative to verl's source checkout, so the installed package's path is given instead. Their entry points
    then copy ``rollout.nnodes``/``n_gpus_per_node`` into the rollout config; so does this, so that
    ``verl.yaml`` and the validation see the config verl's trainer will run."""
    import importlib

    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    spec = MODES[mode]
    config_dir = Path(importlib.import_module(spec.module).__file__).parent / "config"
    search_path = ["hydra.searchpath=[pkg://verl.trainer.config]"] if spec.asynchronous else []
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            verl_config = hydra_compose(config_name=spec.config_name, overrides=[*search_path, *override_list])
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"verl refused the generated config: {exc} (check train.verl.overrides).") from None
    if spec.asynchronous:
        verl_config.actor_rollout_ref.rollout.nnodes = verl_config.rollout.nnodes
        verl_config.actor_rollout_ref.rollout.n_gpus_per_node = verl_config.rollout.n_gpus_per_node
    return verl_config


def validate(verl_config: Any) -> None:
    """verl's own checks (``verl.utils.config.validate_config``), as its trainer runs them at start.

    fully_async: its ``data.train_batch_size`` is 0 (the rollouter feeds one prompt group at a time), which
    ``validate_config`` takes for the size of a step and refuses; the batch each of its trainer steps takes
    is ``ppo_mini_batch_size x require_batches`` prompt groups, so that is what the checks are run on, and
    then what verl's rollouter asserts when it starts."""
    from omegaconf import OmegaConf, open_dict
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    fully_async = "async_training" in verl_config
    checked = verl_config
    if fully_async:
        checked = OmegaConf.create(OmegaConf.to_container(verl_config))
        with open_dict(checked):
            checked.data.train_batch_size = (checked.actor_rollout_ref.actor.ppo_mini_batch_size
                                             * checked.async_training.require_batches)
    try:  # verl prints its verdict and warns that GRPO has no critic: keep stdout for our plan
        with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            validate_config(config=checked, use_reference_policy=need_reference_policy(checked),
                            use_critic=need_critic(checked))
    except (AssertionError, ValueError, TypeError) as exc:
        raise ConfigError(f"verl's config validation failed: {exc}") from None
    if fully_async:
        _check_fully_async(verl_config)


def _check_fully_async(verl_config: Any) -> None:
    """What verl's ``FullyAsyncRollouter`` asserts when it starts (after the GPUs are taken), checked now."""
    rollout = verl_config.actor_rollout_ref.rollout
    problems = [
        (verl_config.data.train_batch_size != 0, "data.train_batch_size must be 0 (the rollouter feeds one prompt group "
                                                 "at a time)"),
        (verl_config.data.gen_batch_size != 1, "data.gen_batch_size must be 1"),
        (verl_config.actor_rollout_ref.hybrid_engine, "actor_rollout_ref.hybrid_engine must be false"),
        (not rollout.calculate_log_probs, "actor_rollout_ref.rollout.calculate_log_probs must be true"),
        (not rollout.multi_turn.enable, "actor_rollout_ref.rollout.multi_turn.enable must be true, or verl runs its "
                                        "single_turn_agent instead of our loop"),
    ]
    wrong = [message for failed, message in problems if failed]
    if wrong:
        raise ConfigError(f"verl's fully_async rollouter would refuse this config: {'; '.join(wrong)} "
                          "(check train.verl.overrides).")


def describe(config: Config, model: str) -> dict[str, Any]:
    """The resolved plan: what the episodes run (protocol, reward, reader), the update shape of a step, batch
    shapes per step, per node and per data-parallel rank, and where each process runs."""
    cfg, verl = config.train, config.train.verl
    s = _shapes(config)
    prompt_len, response_len = verl.max_prompt_length, response_length(config)
    replicas_per_node = _rollout_gpus(config)[1] // verl.tensor_parallel_size
    environment = (f"handler services at {', '.join(config.env.server_urls)} (CPU machines)"
                   if config.env.server_urls else "in process, inside each agent-loop worker")
    dynamic = "actor_rollout_ref.actor.use_dynamic_bsz=true" in verl.overrides
    return {
        "engine": "verl",
        "model": model,
        "run_dir": str(RunFiles.of(config).root),
        "ray": verl.ray_address or "local: started for this run and stopped after",
        "episode": episode_plan(config),
        "update": {
            "prompts_per_step": cfg.prompts_per_step,
            "rollouts_per_step": s["rollouts"],
            "mini_batch_prompts": s["mini"],
            "mini_batch_rollouts": s["mini"] * cfg.group_size,
            "updates_per_step": sync_every(config) if verl.mode == "fully_async" else s["updates"],
        },
        "global": {
            "nodes": verl.nnodes,
            "gpus": s["gpus"],
            "data_parallel_ranks": s["dp"],
            "sequence_parallel_size": verl.sequence_parallel_size,
            "sequence_shape": [prompt_len, response_len],
            "max_steps": cfg.max_steps,
            "validate_every": cfg.eval_every or None,
        },
        "per_node": {
            "gpus": verl.gpus_per_node,
            "rollouts_per_step": s["rollouts"] // verl.nnodes,
            "rollout_servers": replicas_per_node,
            "agent_loop_workers": math.ceil(verl.agent_workers / verl.nnodes),
        },
        "per_rank": {
            "rollouts_per_update": s["per_rank_update"],
            "micro_batch": "packed by tokens (use_dynamic_bsz)" if dynamic else s["micro"],
            "grad_accumulation": None if dynamic else math.ceil(s["per_rank_update"] / s["micro"]),
            "offload": {"params": verl.param_offload, "optimizer": verl.optimizer_offload},
        },
        "mode": describe_mode(config),
        "placement": {
            "driver": f"verl's {MODES[verl.mode].driver} (Ray actor, CPU) on any node; this command waits for it",
            **_placement_of_gpus(config),
            "agent_loop_workers": f"{verl.agent_workers} CPU processes, round-robin over the nodes; each runs "
                                  f"~{math.ceil(s['rollouts'] / verl.agent_workers)} episodes per step",
            "environment": environment,
            "reward": f"our scorer (reward.metric {config.reward.metric}), inside each agent-loop worker",
        },
        "config_hash": config.config_hash(),
    }


def _rollout_gpus(config: Config) -> tuple[int, int]:
    """Machines and GPUs per machine that serve rollouts: the training GPUs themselves in sync mode
    (verl's hybrid engine), their own GPUs in the asynchronous modes."""
    verl = config.train.verl
    if MODES[verl.mode].asynchronous:
        return verl.rollout_nnodes, verl.rollout_gpus_per_node
    return verl.nnodes, verl.gpus_per_node


def _placement_of_gpus(config: Config) -> dict[str, str]:
    verl = config.train.verl
    nodes, per_node = _rollout_gpus(config)
    gpus = verl.nnodes * verl.gpus_per_node
    servers = f"{nodes * per_node // verl.tensor_parallel_size} {verl.rollout_engine} servers, " \
              f"{verl.tensor_parallel_size} GPU(s) each"
    if not MODES[verl.mode].asynchronous:
        return {"actor_ref_rollout": f"one FSDP worker per GPU on every node ({gpus} in all), colocated with "
                                     f"{verl.rollout_engine} (hybrid engine: weights shared between training and rollout)",
                "rollout_servers": servers}
    return {"actor_ref": f"one FSDP worker per training GPU ({verl.nnodes} node(s) x {verl.gpus_per_node})",
            "rollout_servers": f"{servers}, on their own {nodes} node(s) x {per_node} GPUs; weights pushed over NCCL"}


def describe_mode(config: Config) -> dict[str, Any]:
    """The training mode as the plan prints it: verl's entry point and config, and what is off-policy."""
    verl = config.train.verl
    spec = MODES[verl.mode]
    out: dict[str, Any] = {"name": verl.mode, "entry_point": f"{spec.entry_point} ({spec.driver})",
                           "verl_config": spec.config_name}
    if verl.mode == "sync":
        out["staleness"] = "none: every episode of a step is sampled with the weights it trains"
        return out
    sampled = agent_protocol(config).trains_sampled_tokens
    out["old_log_probs"] = ("the sampling log-probs (verl's bypass_mode)" if sampled else
                            "recomputed by the trainer (agent.protocol re-renders the episode, so the sampling "
                            "log-probs belong to other tokens)")
    if verl.mode == "one_step_off":
        out["staleness"] = ("one update: step N+1's batch is generated while step N trains, with the weights "
                            "step N started from (synced between the two generations)")
        return out
    every, mini = sync_every(config), _shapes(config)["mini"]
    out.update({
        "updates_per_weights_version": every,
        "prompts_per_weights_version": every * mini,
        "staleness_threshold": verl.staleness_threshold,
        "max_prompt_groups_per_version": int(mini * (1 + verl.staleness_threshold) * every),
        "in_flight_on_weight_sync": ("resumed: the aborted turn continues from its tokens under the new weights"
                                     if verl.partial_rollout else
                                     "dropped: the episode trains no token and is never scored"),
    })
    return out
