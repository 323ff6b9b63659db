"""The quickstart end to end at toy scale: every stage runs and leaves what the README promises."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepresearcher.cli.main import app

TOY = [
    "world.size=tiny", "train.num_worlds=2", "train.sft.num_tasks=24", "train.sft.steps=3", "train.sft.batch_size=4",
    "train.tiny_model.vocab_size=512", "train.tiny_model.hidden_size=32", "train.tiny_model.num_layers=2",
    "train.tiny_model.num_heads=2", "train.tiny_model.num_kv_heads=1", "train.tiny_model.intermediate_size=64",
    "train.max_steps=2", "train.prompts_per_step=2", "train.group_size=2", "train.micro_batch_size=2",
    "train.save_every=1", "train.eval_tasks=6", "agent.max_turns=3", "agent.max_tokens_per_turn=16",
    "train.bf16=true",  # SFT and TRL's GRPO under bf16 autocast on the CPU (fp32 where the CPU emulates bf16)
]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> tuple[Path, str]:
    """One toy quickstart for the tests of this module, run from a folder outside the repository with the
    shipped recipe named, as an installed package runs it: its run directory and what it printed."""
    tmp_path = tmp_path_factory.mktemp("quickstart")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        overrides = [f"cache_dir={tmp_path / 'cache'}", f"train.runs_dir={tmp_path / 'runs'}", *TOY]
        args = ["quickstart", "--config", "quickstart"] + [a for o in overrides for a in ("--set", o)]
        result = CliRunner().invoke(app, args)
    finally:
        os.chdir(here)
    assert result.exit_code == 0, result.output
    return tmp_path / "runs" / "quickstart", result.output


@pytest.mark.timeout(300)
def test_quickstart_runs_every_stage_and_writes_its_report(toy_run: tuple[Path, str]) -> None:
    run, output = toy_run
    for name in ("report.html", "learning_curve.png", "metrics.jsonl", "config.yaml", "summary.json",
                 "eval_after_sft.jsonl", "eval_after_grpo.jsonl", "base_model/config.json",
                 "sft_model/config.json", "model/config.json"):
        assert (run / name).is_file(), name
    summary = json.loads((run / "summary.json").read_text())
    assert summary["eval_tasks"] == 6 and {"after_sft", "after_grpo", "f1_gain", "f1_gain_se"} <= summary.keys()
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    held_out = [json.loads(line) for line in (run / "eval_after_grpo.jsonl").read_text().splitlines()]
    assert len(held_out) == 6 and all(r["id"].startswith("w10t") for r in held_out), "tasks of the unseen test world"
    for row in held_out:  # what an audit of constant answers needs: the answer, the golds, the tool calls
        assert {"answer", "golds", "question", "turns", "f1", "tool_calls"} <= row.keys() and row["golds"]
        assert sum(1 for t in row["turns"] if t["tool_call"]) == row["tool_calls"]
    assert summary["eval_world"] == "test"
    baselines = summary["baselines"]
    assert baselines["n"]["all"] == 6 and {"type_prior", "relation_prior", "cannot_find", "best"} <= baselines["f1"].keys()
    assert baselines["margin_over_best"]["all"] == pytest.approx(summary["after_grpo"]["f1"] - baselines["f1"]["best"]["all"])
    assert summary["calibration"]["sft_tokens_per_second"] > 0
    during = summary["calibration_during_run"]  # a machine that slows down mid-run shows it
    assert set(during) == {"start", "after SFT", "end"} and min(during.values()) > 0
    assert during["end"] == summary["calibration"]["sft_tokens_per_second"] and "during the run: start" in output
    page = (run / "report.html").read_text()
    assert "after SFT (± standard error" in output and "after GRPO (± standard error" in output and "F1 gain" in page
    assert len({row["type"] for row in held_out}) == 6, "the held-out set is stratified: one task of 6 types"
    assert "F1 gain from GRPO by task type (points, ± paired SE)" in output and "type_mean" in output
    assert "F1 gain from GRPO by task type, paired" in page and "f1_se" in page and "after GRPO SE" in page
    assert summary["by_type"]["after GRPO"]["type_mean"]["n"] == 6 and "collapse_warnings" in summary
    assert "no-tools baselines" in output and "SFT tokens/s" in output
    assert "beside the no-tools baselines" in page and "<td>calibration (not in total)</td>" in page
    assert "{'world'" not in page, "timings are a table, not a Python dict"
    # each step beside the calibration around it and its seconds at the reference figure: a slow hour explains itself
    assert set(summary["timings_normalised_s"]) == set(summary["timings_s"]) == set(summary["timings_calibration"])
    assert summary["timings_calibration"]["world"] == pytest.approx((during["start"] + during["after SFT"]) / 2, abs=0.1)
    assert summary["timings_calibration"]["grpo"] == pytest.approx((during["after SFT"] + during["end"]) / 2, abs=0.1)
    assert summary["total_normalised_s"] > 0 and "seconds at reference" in page and "would have taken" in page
    viewer = (run / "heldout_after_grpo" / "report.html").read_text()
    assert held_out[0]["question"] in viewer and held_out[0]["question"] in page
    # Research behaviours: the oracle's (its SFT episodes, then the held-out tasks) beside the first-hit baseline's,
    # the best no-tools baseline's and each stage's; rates that read the same everywhere are flagged.
    behaviours = summary["behaviours"]
    assert set(behaviours) == {"oracle (SFT episodes)", "oracle (held-out)", "first-hit baseline (held-out)",
                               "best no-tools baseline", "after SFT", "after GRPO"}
    assert behaviours["oracle (held-out)"]["all"]["episodes"]["n"] == 6
    assert set(summary["reference_f1_by_type"]) == {"oracle", "first-hit baseline"}
    assert isinstance(summary["stuck_rates"], dict) and ("STUCK RATES" in output or "No behaviour rate is stuck" in output)
    oracle, guess = behaviours["oracle (SFT episodes)"]["all"], behaviours["best no-tools baseline"]["all"]
    assert oracle["episodes"]["n"] == 24 and guess["episodes"]["n"] == behaviours["after GRPO"]["all"]["episodes"]["n"] == 6
    assert oracle["grounded"]["n"] > 0 and oracle["grounded"]["rate"] > 0.9, "the oracle answers what it read"
    assert guess["grounded"]["rate"] in (0.0, None) and guess["pages_per_answer"]["rate"] in (0.0, None)
    assert all(row["behaviour"]["type"] == row["type"] for row in held_out)
    assert "Research behaviours: the oracle" in page and "Research behaviours by task type" in page
    assert "research behaviours (rate and cases" in output and "| oracle (SFT episodes) | 24 |" in output



@pytest.mark.timeout(300)
def test_eval_and_research_run_the_trained_agent_as_the_quickstart_evaluated_it(toy_run, tmp_path: Path) -> None:
    """``eval`` and ``research`` on the quickstart's trained model and held-out world run the episodes its own
    evaluation ran: per task the same F1, format verdict and tool calls, and ``research`` the same tokens.
    (They once built another system turn and sampled at another temperature: 40 of 40 format failures.)"""
    import asyncio

    from deepresearcher.agent.trajectory import Trajectory
    from deepresearcher.cli.research_cmd import run_research, trained_agent
    from deepresearcher.config import load_config
    from deepresearcher.eval.runner import read_records, run_eval
    from deepresearcher.train.tasks import task_sets

    run, _ = toy_run
    agent = trained_agent(run)
    assert agent is not None and agent.model == run / "model"
    from deepresearcher.world import load_tasks  # the notice's example: a one-hop question of the held-out world

    assert agent.example in {t.question for t in load_tasks(agent.world, "test") if t.type == "hop1"}
    config = load_config(agent.config, [*agent.overrides, "eval.benchmarks=[world]"])
    held_out = task_sets(load_config(agent.config, [])).test
    data = tmp_path / "held_out.jsonl"
    data.write_text("".join(json.dumps({"id": t["id"], "data_source": "world", "question": t["question"],
                                        "golds": t["golds"]}) + "\n" for t in held_out))
    run_eval(config, tmp_path / "eval", data_file=data)
    evaluated = {r["task_id"].removeprefix("world_"): r for r in read_records(tmp_path / "eval" / "trajectories.jsonl")}
    quickstart = [json.loads(line) for line in (run / "eval_after_grpo.jsonl").read_text().splitlines()]
    assert evaluated.keys() == {row["id"] for row in quickstart}
    for row in quickstart:
        record = evaluated[row["id"]]
        calls = sum(1 for turn in record["trajectory"]["turns"] if turn["tool_call"])
        assert (record["f1"], not record["format_ok"], calls) == (row["f1"], bool(row["format_error"]), row["tool_calls"])

    first = held_out[0]
    researched = asyncio.run(run_research(first["question"], config))
    assert researched.all_ids == Trajectory.model_validate(evaluated[first["id"]]["trajectory"]).all_ids


@pytest.mark.parametrize("emulated", [False, True])
def test_quickstart_trains_in_fp32_where_the_cpu_emulates_bf16(emulated: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """bf16 autocast is slower than fp32 where the CPU has no native bf16: there the quickstart turns it off, aloud."""
    from deepresearcher.config import load_config
    from deepresearcher.quickstart.recipe import _bf16_where_native
    from deepresearcher.train import precision

    monkeypatch.setattr(precision, "bf16_is_emulated", lambda: emulated)
    said: list[str] = []
    config = _bf16_where_native(load_config(None, ["train.bf16=true"]), said.append)
    assert config.train.bf16 is not emulated
    assert bool(said) is emulated and all("training in fp32" in line for line in said)
