"""The step shape over several processes, and the accelerate configs the paper recipe names.

TRL's generation batch is ``per_device_train_batch_size x processes x gradient_accumulation_steps``: without
dividing by the processes, 8 GPUs would sample 8x the configured rollouts per step.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepresearcher.cli.main import app
from deepresearcher.config import load_config
from deepresearcher.errors import ConfigError
from deepresearcher.train.grpo import plan, step_shape

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "paper-qwen2.5-7b.yaml"
ACCELERATE = {"deepspeed-zero3.yaml": "DEEPSPEED", "fsdp.yaml": "FSDP"}


def test_dry_run_prints_per_process_and_global_figures_on_eight_processes(monkeypatch) -> None:
    """`WORLD_SIZE=8 train --dry-run` on the paper recipe: 256 prompts x 16 = 4,096 rollouts per step, 512 per process."""
    monkeypatch.setenv("WORLD_SIZE", "8")
    result = CliRunner().invoke(app, ["train", "--config", str(RECIPE), "--dry-run"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert (shown["processes"], shown["prompts_per_step"], shown["rollouts_per_step"]) == (8, 256, 4096)
    assert (shown["prompts_per_process"], shown["rollouts_per_process"]) == (32, 512)
    assert shown["micro_batches_per_process"] == 512 // load_config(RECIPE).train.micro_batch_size


def test_trl_samples_the_configured_rollouts_on_eight_processes(monkeypatch, tmp_path) -> None:
    """TRL itself, told it runs on 8 processes, computes a generation batch of exactly 4,096 rollouts per step."""
    from transformers import TrainingArguments

    from deepresearcher.train import grpo
    from deepresearcher.train.run_dir import RunDir

    # the launcher's view (WORLD_SIZE) and accelerate's, both 8, without starting 8 processes
    monkeypatch.setattr(grpo, "process_count", lambda: 8)
    monkeypatch.setattr(TrainingArguments, "world_size", property(lambda self: 8))
    config = load_config(RECIPE, ["train.use_vllm=false", "train.bf16=false"])
    args = grpo.grpo_args(config, RunDir(tmp_path), [])
    assert args.generation_batch_size == 4096 == 256 * 16
    assert args.per_device_train_batch_size * 8 * args.gradient_accumulation_steps == 4096
    assert args.steps_per_generation == args.gradient_accumulation_steps == 512 // config.train.micro_batch_size


def test_a_launcher_that_disagrees_with_world_size_is_refused(monkeypatch, tmp_path) -> None:
    """If accelerate's process count is not WORLD_SIZE's, the step would change size: refuse it, naming both."""
    from deepresearcher.train import grpo
    from deepresearcher.train.run_dir import RunDir

    monkeypatch.setattr(grpo, "process_count", lambda: 2)  # WORLD_SIZE=2, but accelerate runs this one process
    config = load_config(None, ["train.prompts_per_step=2", "train.group_size=4", "train.micro_batch_size=2"])
    with pytest.raises(ConfigError, match="WORLD_SIZE says 2"):
        grpo.grpo_args(config, RunDir(tmp_path), [])


@pytest.mark.parametrize(
    ("processes", "overrides", "message"),
    [
        (8, ["train.prompts_per_step=12"], "divisible by the 8 training processes"),
        (4, ["train.prompts_per_step=4", "train.group_size=3", "train.micro_batch_size=2"], "3 per process"),
    ],
)
def test_shapes_that_do_not_divide_are_refused(monkeypatch, processes, overrides, message) -> None:
    """Prompts that do not split over the processes, or per-process rollouts over the micro-batch, are errors with a fix."""
    monkeypatch.setenv("WORLD_SIZE", str(processes))
    with pytest.raises(ConfigError, match=message):
        plan(load_config(None, overrides))


def test_one_process_keeps_the_old_shape(monkeypatch) -> None:
    """Without a launcher the step is the whole batch on one process."""
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    shape = step_shape(load_config(RECIPE).train)
    assert (shape.processes, shape.rollouts, shape.rollouts_per_process) == (1, 4096, 4096)
    monkeypatch.setenv("WORLD_SIZE", "eight")
    with pytest.raises(ConfigError, match="WORLD_SIZE"):
        step_shape(load_config(RECIPE).train)


def test_the_recipe_names_the_shipped_accelerate_configs() -> None:
    header = RECIPE.read_text()
    for name in ACCELERATE:
        assert f"configs/accelerate/{name}" in header and (ROOT / "configs" / "accelerate" / name).is_file()


@pytest.mark.parametrize("name", sorted(ACCELERATE))
def test_accelerate_configs_launch_as_intended(name, monkeypatch) -> None:
    """accelerate's own launcher reads each file: 8 bf16 processes, ZeRO stage 3 or FSDP2 per Qwen2 decoder layer,
    a process count that divides the recipe's prompts, and (FSDP) a plugin that builds from the launcher's environment."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    path = ROOT / "configs" / "accelerate" / name
    text = path.read_text()
    assert text.startswith("#") and "Command:" in text and "paper-qwen2.5-7b.yaml" in text
    args = launch_command_parser().parse_args(["--config_file", str(path), "-m", "deepresearcher.cli.main", "train"])
    args, defaults, _ = _validate_launch_command(args)
    assert defaults.distributed_type.value == ACCELERATE[name]
    assert args.num_processes == 8 and args.mixed_precision == "bf16"
    assert load_config(RECIPE).train.prompts_per_step % args.num_processes == 0
    if ACCELERATE[name] == "DEEPSPEED":
        args.deepspeed_fields_from_accelerate_config = list(defaults.deepspeed_config)  # as `accelerate launch` does
        _, env = prepare_deepspeed_cmd_env(args)
        assert env["ACCELERATE_DEEPSPEED_ZERO_STAGE"] == "3" and env["ACCELERATE_USE_DEEPSPEED"] == "true"
        return
    from accelerate.utils import FullyShardedDataParallelPlugin
    from transformers.models.qwen2 import modeling_qwen2

    env = prepare_multi_gpu_env(args)
    for key, value in env.items():
        if key.startswith(("FSDP_", "ACCELERATE_")) and key not in os.environ:
            monkeypatch.setenv(key, value)
    plugin = FullyShardedDataParallelPlugin()
    assert plugin.fsdp_version == 2 and plugin.reshard_after_forward is True
    assert plugin.transformer_cls_names_to_wrap == ["Qwen2DecoderLayer"]
    assert hasattr(modeling_qwen2, "Qwen2DecoderLayer")
