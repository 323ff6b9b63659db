"""`train --engine verl --dry-run`: the files it writes, verl's own validation of its config, the printed plan,
and the refusals (with what to change) of shapes verl would reject later on a cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepresearcher.cli.main import app
from deepresearcher.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "paper-qwen2.5-7b-verl.yaml"


def dry_run(small_world: Path, tmp_path: Path, *extra: str):  # noqa: ANN201
    return CliRunner().invoke(app, [
        "train", "--engine", "verl", "--config", str(RECIPE), "--dry-run",
        "--set", f"world.dir={small_world}", "--set", "world.size=small", "--set", f"train.runs_dir={tmp_path}",
        "--set", f"cache_dir={tmp_path / 'cache'}", *extra,
    ])


def test_default_install_never_imports_verl() -> None:
    """The CLI, the config and the planner import without verl: it is loaded only when a verl run is prepared."""
    code = ("import sys; import deepresearcher.cli.main, deepresearcher.integrations.verl.plan; "
            "from deepresearcher.config import Config; Config(); assert 'verl' not in sys.modules, 'verl was imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_missing_verl_names_the_install_command() -> None:
    code = ("import sys; sys.modules['verl'] = None\n"
            "from deepresearcher.integrations.verl import require_verl\n"
            "try:\n    require_verl()\nexcept Exception as exc:\n    print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True, text=True).stdout
    assert out.startswith("MissingDependencyError") and 'pip install "deepresearcher[verl]"' in out


def test_paper_recipe_dry_run_writes_a_config_verl_accepts(small_world: Path, tmp_path: Path) -> None:
    """The recipe's plan follows from the file, and the written verl.yaml passes verl's validation again."""
    pytest.importorskip("verl")
    from omegaconf import OmegaConf

    from deepresearcher.data.formats import load_file
    from deepresearcher.integrations.verl import plan

    result = dry_run(small_world, tmp_path)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["global"] == {"nodes": 1, "gpus": 8, "prompts_per_step": 256, "rollouts_per_step": 4096,
                               "updates_per_step": 4, "rollouts_per_update": 1024, "sequence_shape": [2048, 30720],
                               "max_steps": 100}
    assert shown["per_node"]["rollout_servers"] == 4 and shown["per_gpu"]["rollouts_per_update"] == 128
    assert shown["verl_validation"] == "passed" and "local" in shown["ray"]

    written = OmegaConf.load(shown["verl_config"])
    plan.validate(written)  # verl's validate_config, on the file as written
    rollout = written.actor_rollout_ref.rollout
    assert (rollout.mode, rollout.calculate_log_probs, rollout.n, rollout.agent.default_agent_loop) == (
        "async", True, 16, "deepresearcher")
    assert written.algorithm.adv_estimator == "grpo" and written.actor_rollout_ref.actor.kl_loss_coef == 0.001
    assert written.trainer.resume_mode == "disable" and written.trainer.logger == ["console", "tensorboard", "file"]
    assert written.actor_rollout_ref.actor.optim.lr == 1e-6 and written.actor_rollout_ref.actor.loss_agg_mode == "token-mean"
    registration = OmegaConf.load(rollout.agent.agent_loop_config_path)
    assert registration[0]["_target_"] == plan.AGENT_LOOP_CLASS
    assert Path(registration[0]["deepresearcher_config"]).is_file()
    tasks = load_file(Path(written.data.train_files))
    assert len(tasks) == shown["data"]["train_tasks"] > 0 and all(t.golds for t in tasks)


def test_cluster_shapes_that_verl_would_reject_are_refused_with_a_fix(small_world: Path, tmp_path: Path) -> None:
    """3 nodes x 8 GPUs cannot share an update of 64 prompts x 16 rollouts: the error says what to change."""
    result = dry_run(small_world, tmp_path, "--set", "train.verl.nnodes=3")
    assert isinstance(result.exception, ConfigError)  # the CLI prints it as one `Error:` line, exit 2
    assert "24 GPUs" in str(result.exception) and "change one of them" in str(result.exception)


def test_bad_verl_override_is_reported_by_name(small_world: Path, tmp_path: Path) -> None:
    pytest.importorskip("verl")
    result = dry_run(small_world, tmp_path, "--set", "train.verl.overrides=[actor_rollout_ref.actor.no_such_knob=1]")
    assert isinstance(result.exception, ConfigError)
    assert "no_such_knob" in str(result.exception) and "train.verl.overrides" in str(result.exception)
