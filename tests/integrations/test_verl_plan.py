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


def dry_run(tmp_path: Path, *extra: str, data: str = "deepresearcher:test"):  # noqa: ANN201
    """The paper recipe's dry run, trained on the original's test.parquet (the hub's train splits are not
    readable offline; the recipe's validation set, the original's dev.parquet, is)."""
    return CliRunner().invoke(app, [
        "train", "--engine", "verl", "--config", str(RECIPE), "--dry-run", "--data", data,
        "--set", f"train.runs_dir={tmp_path}", "--set", f"cache_dir={tmp_path / 'cache'}", *extra,
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


def test_paper_recipe_dry_run_writes_a_config_verl_accepts(shared_data_dir: Path, tmp_path: Path) -> None:
    """The recipe's plan follows from the file (one update of 4,096 rollouts per step, as train_grpo.sh), and
    the written verl.yaml holds train_grpo.sh's settings and passes verl's validation again."""
    pytest.importorskip("verl")
    from omegaconf import OmegaConf

    from deepresearcher.data.formats import load_file
    from deepresearcher.integrations.verl import plan

    result = dry_run(tmp_path)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["update"] == {"prompts_per_step": 256, "rollouts_per_step": 4096, "mini_batch_prompts": 256,
                               "mini_batch_rollouts": 4096, "updates_per_step": 1}
    assert shown["global"] == {"nodes": 1, "gpus": 8, "data_parallel_ranks": 2, "sequence_parallel_size": 4,
                               "sequence_shape": [2048, 30720], "max_steps": 100, "validate_every": 1}
    assert set(shown["episode"]) >= {"protocol", "reward_metric", "reader"}
    assert shown["per_node"]["rollout_servers"] == 8 and shown["per_rank"]["rollouts_per_update"] == 2048
    assert shown["per_rank"]["offload"] == {"params": True, "optimizer": True}
    assert shown["verl_validation"] == "passed" and "local" in shown["ray"]

    written = OmegaConf.load(shown["verl_config"])
    plan.validate(written)  # verl's validate_config, on the file as written
    actor, ref, rollout = (written.actor_rollout_ref[k] for k in ("actor", "ref", "rollout"))
    # No sampling log-probs: the original's protocol trains re-tokenized text, so only recomputed ones mean anything.
    assert (rollout.mode, rollout.calculate_log_probs, rollout.n, rollout.agent.default_agent_loop) == (
        "async", False, 16, "deepresearcher")
    # train_grpo.sh, setting by setting (docs/verl.md lists the differences)
    assert written.data.train_batch_size == 256 and actor.ppo_mini_batch_size == 256  # x rollout.n: 4,096
    assert (actor.ulysses_sequence_parallel_size, ref.ulysses_sequence_parallel_size) == (4, 4)
    assert (actor.fsdp_config.param_offload, actor.fsdp_config.optimizer_offload, ref.fsdp_config.param_offload) == (
        True, True, True)
    assert (actor.use_dynamic_bsz, actor.ppo_max_token_len_per_gpu, written.actor_rollout_ref.model.use_remove_padding) == (
        True, 12288, True)
    assert (rollout.tensor_model_parallel_size, rollout.gpu_memory_utilization, rollout.max_num_batched_tokens,
            rollout.max_model_len) == (1, 0.6, 32768, 32768)
    assert (actor.use_kl_loss, actor.kl_loss_coef, actor.kl_loss_type, actor.entropy_coeff, actor.clip_ratio) == (
        True, 0.001, "low_var_kl", 0.001, 0.2)
    assert actor.optim.lr == 1e-6 and actor.optim.weight_decay == 0.01 and actor.loss_agg_mode == "token-mean"
    assert (rollout.temperature, rollout.top_p, rollout.top_k) == (1.0, 1.0, -1)
    assert written.trainer.test_freq == 1 and written.trainer.total_epochs == 1 and not written.trainer.val_before_train
    assert written.algorithm.adv_estimator == "grpo" and not written.algorithm.use_kl_in_reward
    assert written.trainer.resume_mode == "disable" and written.trainer.logger == ["console", "tensorboard", "file"]
    registration = OmegaConf.load(rollout.agent.agent_loop_config_path)
    assert registration[0]["_target_"] == plan.AGENT_LOOP_CLASS
    assert Path(registration[0]["deepresearcher_config"]).is_file()
    train, val = load_file(Path(written.data.train_files)), load_file(Path(written.data.val_files))
    assert len(train) == shown["data"]["train_tasks"] >= 256 and all(t.golds for t in train)
    assert len(val) == 875 and {t.source for t in val} >= {"nq", "tq", "hotpotqa", "2wiki"}  # the original's dev
    assert {t.source for t in train} >= {"nq", "hotpotqa"}  # benchmark sources keep their names (verl's data_source)
    assert not {t.question for t in train} & {t.question for t in val}


def test_the_recipe_trains_on_the_papers_mix() -> None:
    """NQ : TQ : HotpotQA : 2Wiki = 1 : 1 : 3 : 3, as the TRL paper recipe; validation on the original's dev set."""
    from deepresearcher.config import load_config

    config = load_config(RECIPE)
    assert [(s.kind, s.name, s.split, s.ratio) for s in config.train.data] == [
        ("benchmark", "nq", "train", 1), ("benchmark", "tq", "train", 1),
        ("benchmark", "hotpotqa", "train", 3), ("benchmark", "2wiki", "train", 3)]
    trl = load_config(ROOT / "configs" / "paper-qwen2.5-7b.yaml")
    assert config.train.data == trl.train.data
    assert [(s.name, s.split) for s in config.train.eval_data] == [("deepresearcher", "dev")]


@pytest.mark.parametrize("data, extra, fix", [
    ("hotpotqa:distractor_dev", [], "lower train.prompts_per_step."),  # 103 questions
    # the small world, held out as before: SFT keeps train.sft.num_tasks of its train tasks
    ("world", ["--set", "train.eval_data=null"], "lower that too"),
])
def test_too_few_prompts_for_one_step_are_refused(shared_data_dir: Path, small_world: Path, tmp_path: Path,
                                                 data: str, extra: list[str], fix: str) -> None:
    """verl drops a last partial batch: with fewer prompts than one step takes it would have no batch and
    step 1 would raise StopIteration. The dry run refuses, saying what to change, and writes nothing."""
    result = dry_run(tmp_path, "--set", f"world.dir={small_world}", "--set", "world.size=small", *extra, data=data)
    assert isinstance(result.exception, ConfigError), result.output
    message = str(result.exception)
    assert "train.prompts_per_step = 256" in message and "no step" in message and fix in message
    assert not (tmp_path / "paper-qwen2.5-7b-verl" / "verl" / "verl.yaml").exists()


def test_a_run_without_held_out_tasks_is_refused(shared_data_dir: Path, tmp_path: Path) -> None:
    result = dry_run(tmp_path, "--set", "train.eval_data=[]")
    assert isinstance(result.exception, ConfigError), result.output
    assert "train.eval_data" in str(result.exception)


def test_cluster_shapes_that_verl_would_reject_are_refused_with_a_fix(tmp_path: Path) -> None:
    """3 nodes x 8 GPUs / sequence parallel 4 = 6 ranks cannot share an update of 4,096 rollouts."""
    result = dry_run(tmp_path, "--set", "train.verl.nnodes=3")
    assert isinstance(result.exception, ConfigError)  # the CLI prints it as one `Error:` line, exit 2
    assert "6 data-parallel ranks" in str(result.exception) and "change one of them" in str(result.exception)
    result = dry_run(tmp_path, "--set", "train.verl.sequence_parallel_size=3")
    assert isinstance(result.exception, ConfigError) and "must divide the 8 GPUs" in str(result.exception)
    result = dry_run(tmp_path, "--set", "train.drop_zero_signal_groups=true")
    assert isinstance(result.exception, ConfigError) and "TRL-engine option" in str(result.exception)


def test_bad_verl_override_is_reported_by_name(shared_data_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("verl")
    result = dry_run(tmp_path, "--set", "train.verl.overrides=[actor_rollout_ref.actor.no_such_knob=1]")
    assert isinstance(result.exception, ConfigError)
    assert "no_such_knob" in str(result.exception) and "train.verl.overrides" in str(result.exception)


def test_the_docs_web_service_config_is_valid(tmp_path: Path) -> None:
    """docs/verl.md shows `my-web.yaml` in full: it loads, and serves Serper with the key from the environment."""
    from deepresearcher.config import load_config

    text = (ROOT / "docs" / "verl.md").read_text()
    block = text.split("# my-web.yaml:", 1)[1].split("```", 1)[0]
    (tmp_path / "my-web.yaml").write_text("# my-web.yaml:" + block)
    config = load_config(tmp_path / "my-web.yaml")
    assert config.search.backend == "serper" and config.search.top_k == 10
    assert config.backends.serper.api_key_env == "SERPER_API_KEY" and config.serve.host == "0.0.0.0"


def test_fully_async_dry_run_composes_verls_fully_async_config(shared_data_dir: Path, tmp_path: Path) -> None:
    """train.verl.mode=fully_async: verl's own fully_async_ppo_trainer.yaml with the recipe's settings and the
    async knobs under verl's names, validated by verl; the plan says what runs it and what is off-policy."""
    pytest.importorskip("verl")
    from omegaconf import OmegaConf

    from deepresearcher.integrations.verl import plan

    result = dry_run(tmp_path, "--set", "train.verl.mode=fully_async", "--set", "train.verl.staleness_threshold=0.5",
                     "--set", "train.verl.ppo_mini_batch_size=128", "--set", "train.verl.rollout_gpus_per_node=4",
                     "--set", "train.verl.partial_rollout=false")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    mode = shown["mode"]
    assert mode["name"] == "fully_async" and "fully_async_main.main" in mode["entry_point"]
    assert (mode["updates_per_weights_version"], mode["prompts_per_weights_version"]) == (2, 256)  # 256 / 128
    assert mode["max_prompt_groups_per_version"] == 384 and mode["in_flight_on_weight_sync"].startswith("dropped")
    assert "recomputed" in mode["old_log_probs"]  # the recipe's protocol re-renders the episode
    assert "FullyAsyncTaskRunner" in shown["placement"]["driver"] and shown["per_node"]["rollout_servers"] == 4

    written = OmegaConf.load(shown["verl_config"])
    plan.validate(written)
    assert dict(written.async_training) | {"staleness_threshold": 0.5, "trigger_parameter_sync_step": 2,
                                          "partial_rollout": False, "require_batches": 1} == dict(written.async_training)
    assert written.data.train_batch_size == 0 and written.data.gen_batch_size == 1
    assert written.rollout.total_rollout_steps == 100 * 2 * 128 and written.rollout.n == 16
    assert (written.rollout.n_gpus_per_node, written.actor_rollout_ref.rollout.n_gpus_per_node) == (4, 4)
    rollout, actor = written.actor_rollout_ref.rollout, written.actor_rollout_ref.actor
    assert not written.actor_rollout_ref.hybrid_engine and rollout.multi_turn.enable and rollout.calculate_log_probs
    assert not written.algorithm.rollout_correction.bypass_mode and not actor.use_rollout_log_probs
    assert rollout.agent.default_agent_loop == "deepresearcher" and actor.ppo_mini_batch_size == 128
    assert actor.ulysses_sequence_parallel_size == 4 and written.trainer.test_freq == 1  # the recipe's, kept


def test_one_step_off_dry_run_composes_verls_one_step_off_config(shared_data_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("verl")
    from omegaconf import OmegaConf

    result = dry_run(tmp_path, "--set", "train.verl.mode=one_step_off", "--set", "train.verl.rollout_nnodes=2")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["mode"]["name"] == "one_step_off" and shown["mode"]["staleness"].startswith("one update")
    written = OmegaConf.load(shown["verl_config"])
    assert "async_training" not in written and written.rollout.nnodes == 2
    assert written.actor_rollout_ref.rollout.nnodes == 2 and not written.actor_rollout_ref.hybrid_engine
    assert written.actor_rollout_ref.rollout.checkpoint_engine.backend == "nccl"  # one_step_off's YAML
    assert written.data.train_batch_size == 256


def test_async_modes_use_the_sampling_log_probs_only_where_the_sampled_tokens_are_trained() -> None:
    """verl's bypass_mode (the sampling log-probs are the old policy) under the native protocol; the original's
    protocol re-renders the text it trains, so there the trainer recomputes them."""
    from deepresearcher.config import load_config
    from deepresearcher.integrations.verl import plan

    native = plan.mode_overrides(load_config(overrides=["train.verl.mode=fully_async", "agent.protocol=native"]))
    assert "algorithm.rollout_correction.bypass_mode=true" in native
    assert "actor_rollout_ref.actor.use_rollout_log_probs=true" in native
    assert "algorithm.rollout_correction.bypass_mode=false" in plan.mode_overrides(
        load_config(RECIPE, overrides=["train.verl.mode=one_step_off"]))
    assert plan.mode_overrides(load_config(overrides=["train.verl.mode=sync"])) == []


def test_an_override_the_fully_async_rollouter_would_refuse_is_refused_now(shared_data_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("verl")
    result = dry_run(tmp_path, "--set", "train.verl.mode=fully_async",
                     "--set", "train.verl.overrides=[actor_rollout_ref.rollout.multi_turn.enable=false]")  # no dynamic bsz either
    assert isinstance(result.exception, ConfigError), result.output
    assert "single_turn_agent" in str(result.exception)
