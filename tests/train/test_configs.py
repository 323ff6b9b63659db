"""Every shipped training recipe loads, validates and dry-runs on CPU; bad step shapes are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepresearcher.cli.main import app
from deepresearcher.config import RECIPES_DIR, load_config
from deepresearcher.errors import ConfigError
from deepresearcher.train.grpo import plan

CONFIGS = sorted(RECIPES_DIR.glob("*.yaml"))
RECIPES = {"quickstart.yaml", "smollm2-135m-world.yaml", "paper-qwen2.5-7b.yaml"}


def test_recipes_are_shipped() -> None:
    assert RECIPES <= {p.name for p in CONFIGS}


@pytest.mark.parametrize("path", [p for p in CONFIGS if p.name in RECIPES], ids=lambda p: p.name)
def test_recipe_dry_runs(path: Path) -> None:
    """`deepresearcher train --config X --dry-run` prints a plan whose numbers follow from the file."""
    text = path.read_text()
    assert text.startswith("#") and "Command:" in text, "each recipe starts with a header naming its command"
    result = CliRunner().invoke(app, ["train", "--config", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    config = load_config(path)
    assert shown["rollouts_per_step"] == config.train.prompts_per_step * config.train.group_size
    assert shown["trl_loss_type"] == "dapo"


def test_indivisible_micro_batch_is_refused_with_a_fix() -> None:
    config = load_config(None, ["train.group_size=16", "train.prompts_per_step=3", "train.micro_batch_size=32"])
    with pytest.raises(ConfigError, match="micro_batch_size"):
        plan(config)


def test_greedy_rollouts_are_refused_for_grpo() -> None:
    with pytest.raises(ConfigError, match="temperature"):
        plan(load_config(None, ["agent.temperature=0"]))


def test_quickstart_and_sft_dry_run() -> None:
    """The quickstart and SFT commands resolve their plan from the recipe without training anything."""
    path = next(p for p in CONFIGS if p.name == "quickstart.yaml")
    result = CliRunner().invoke(app, ["quickstart", "--config", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["model"] == "(quickstart tiny model)"
    result = CliRunner().invoke(app, ["sft", "--config", str(path), "--dry-run", "--set", "train.sft.steps=7"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["steps"] == 7


def test_train_without_a_model_says_what_to_pass(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["train", "--set", f"train.runs_dir={tmp_path}"])
    assert isinstance(result.exception, ConfigError)
    assert "--model" in str(result.exception)


def test_skipping_sft_without_a_warm_start_is_refused(tmp_path: Path) -> None:
    """train.sft.steps=0 means "--model is the warm start"; without --model it stops before doing any work."""
    result = CliRunner().invoke(app, ["quickstart", "--set", "train.sft.steps=0", "--set", f"train.runs_dir={tmp_path}"])
    assert isinstance(result.exception, ConfigError)
    assert "--model" in str(result.exception)
    assert not (tmp_path / "quickstart").exists()


def test_sft_and_grpo_with_zero_steps_say_what_to_set(tiny_model_dir: Path, tmp_path: Path) -> None:
    from deepresearcher.train.grpo import train_grpo
    from deepresearcher.warmstart.sft import train_sft

    config = load_config(None, ["train.sft.steps=0", "train.max_steps=0", f"train.runs_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="train.sft.steps"):
        train_sft(tiny_model_dir, [object()], config.train.sft, tmp_path / "sft")  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="train.max_steps"):
        train_grpo(config, tiny_model_dir, [{"id": "t"}], lambda *a, **k: [], lambda *a: {})


@pytest.mark.parametrize("checkpointing", [False, True])
def test_activation_checkpointing_follows_our_config_not_trls_default(tmp_path: Path, checkpointing: bool) -> None:
    """TRL turns activation checkpointing on by default (a third more compute); ours decides."""
    from deepresearcher.train.grpo import grpo_args
    from deepresearcher.train.run_dir import RunDir

    config = load_config(None, [f"train.gradient_checkpointing={str(checkpointing).lower()}",
                                "train.prompts_per_step=2", "train.group_size=4", "train.micro_batch_size=4"])
    args = grpo_args(config, RunDir(tmp_path), [])
    assert args.activation_checkpointing is checkpointing and args.gradient_checkpointing is checkpointing
    assert args.num_generations == 4 and args.gradient_accumulation_steps == 2


@pytest.mark.parametrize("native", [True, False])
def test_bf16_on_a_cpu_warns_only_where_bf16_is_emulated(native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """bf16 autocast is ~1.4x faster on a CPU with native bf16 and slower where it is emulated: the plan says so."""
    from deepresearcher.inference import device
    from deepresearcher.train import precision

    monkeypatch.setattr(device, "on_gpu", lambda: False)
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
    warnings = " ".join(plan(load_config(None, ["train.bf16=true"]))["warnings"])
    assert ("train.bf16 on this CPU is emulated" in warnings) is not native
    assert "train.bf16" not in " ".join(plan(load_config(None, ["train.bf16=false"]))["warnings"])
