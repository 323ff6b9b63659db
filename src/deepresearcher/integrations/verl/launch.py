"""Prepare and run a verl training run: files, verl's config and checks, Ray up, verl's trainer, Ray down.

One machine: Ray is started for the run (``ray.init`` with no address) and stopped when it ends, so there
is nothing to start by hand. A cluster: ``train.verl.ray_address`` (``auto`` on a node of a cluster made
with ``ray start``) joins it and only disconnects at the end. The trainer itself is verl's, unchanged, by
``train.verl.mode``: ``main_ppo``'s ``run_ppo`` with ``TaskRunnerV1`` (sync), or the asynchronous recipes'
own ``main`` (one_step_off_policy's ``OneStepTaskRunner``, fully_async_policy's ``FullyAsyncTaskRunner``),
handed the composed config as Hydra's ``main`` takes one in place of its command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deepresearcher.config import Config
from deepresearcher.integrations.verl import plan, require_verl


@dataclass
class PreparedRun:
    """Everything a verl run needs, written and checked."""

    files: plan.RunFiles
    verl_config: Any
    summary: dict[str, Any]
    mode: str = "sync"  # train.verl.mode: which of verl's entry points runs verl_config


def prepare(config: Config, model: str, *, resume: bool = False) -> PreparedRun:
    """Write the run files, compose verl's config, and run verl's validation on it (the ``--dry-run`` checks)."""
    require_verl()
    from omegaconf import OmegaConf

    files = plan.RunFiles.of(config)
    summary = plan.describe(config, model)
    override_list = plan.overrides(config, files, model, resume=resume)
    counts = plan.write_run_files(config, files)
    verl_config = plan.compose(override_list, config.train.verl.mode)
    plan.validate(verl_config)
    files.verl_yaml.write_text(OmegaConf.to_yaml(verl_config), encoding="utf-8")
    summary["data"] = {**counts, "train_parquet": str(files.train_parquet), "val_parquet": str(files.val_parquet)}
    summary["verl_config"] = str(files.verl_yaml)
    summary["verl_validation"] = "passed"
    return PreparedRun(files, verl_config, summary, config.train.verl.mode)


def run(prepared: PreparedRun) -> None:
    """Run the mode's verl entry point on the prepared config; Ray is shut down (or disconnected) afterwards."""
    import importlib

    import ray

    mode = plan.MODES[prepared.mode]
    try:
        if mode.asynchronous:
            importlib.import_module(mode.module).main(prepared.verl_config)
        else:
            from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
            from verl.utils.device import auto_set_device

            auto_set_device(prepared.verl_config)
            run_ppo(prepared.verl_config, task_runner_class=TaskRunnerV1)
    finally:
        if ray.is_initialized():
            ray.shutdown()
