"""``bench quickstart``: recipes compared over seeds, each (arm, seed) a real quickstart process on one thread."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from deepresearcher.errors import ConfigError
from deepresearcher.train.heldout import mean_se


TOY = [  # the toy quickstart of tests/quickstart, smaller still
    "world.size=tiny", "train.num_worlds=2", "train.sft.num_tasks=16", "train.sft.steps=2", "train.sft.batch_size=4",
    "train.tiny_model.vocab_size=512", "train.tiny_model.hidden_size=32", "train.tiny_model.num_layers=2",
    "train.tiny_model.num_heads=2", "train.tiny_model.num_kv_heads=1", "train.tiny_model.intermediate_size=64",
    "train.max_steps=1", "train.prompts_per_step=2", "train.group_size=2", "train.micro_batch_size=2",
    "train.eval_tasks=6", "agent.max_turns=3", "agent.max_tokens_per_turn=16",
]


@pytest.fixture(scope="module")
def bench(load_bench) -> ModuleType:
    return load_bench("quickstart")


def write_run(root: Path, name: str, f1s: list[float], se: float = 0.05, seconds: float = 100.0) -> Path:
    """A run folder as the quickstart leaves it: its summary and its held-out rows after GRPO."""
    run = root / name
    run.mkdir(parents=True)
    rows = [{"id": f"t{i}", "type": "hop1", "f1": f1} for i, f1 in enumerate(f1s)]
    (run / "eval_after_grpo.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    final = {"f1": sum(f1s) / len(f1s), "f1_se": se, "n": len(f1s)}
    (run / "summary.json").write_text(json.dumps({
        "after_sft": {"f1": 0.1, "f1_se": se, "n": len(f1s)}, "after_grpo": final, "f1_gain": final["f1"] - 0.1,
        "f1_gain_se": se, "total_s": seconds, "total_normalised_s": seconds, "threads": {"sft": 1},
        "calibration": {"sft_tokens_per_second": 5000.0},
    }))
    return run


@pytest.mark.parametrize("spec", ["", "b12=3", "b12 train.sft.batch_size", "-x train.seed=1", "a/b train.seed=1"])
def test_an_arm_that_is_not_name_then_overrides_is_refused(bench, spec: str) -> None:
    with pytest.raises(ConfigError, match="--arm"):
        bench.parse_arm(spec)


def test_arms_and_seeds_are_checked_before_anything_runs(bench, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with pytest.raises(ConfigError, match="must differ"):
        bench.main(["--arm", "a", "--arm", "a train.seed=1", "--runs-dir", str(runs)])
    with pytest.raises(ConfigError, match="--seeds"):
        bench.main(["--arm", "a", "--seeds", "0,x", "--runs-dir", str(runs)])
    assert not runs.exists()


def test_arms_are_compared_seed_by_seed_on_the_same_tasks_and_over_the_seeds(bench, tmp_path: Path) -> None:
    first = {0: [1.0, 0.0, 1.0, 0.5, 1.0], 1: [0.0, 1.0, 1.0, 1.0, 0.0]}
    lower = {0: [0.0, 0.0, 1.0, 0.5, 0.0], 1: [0.0, 0.0, 1.0, 0.0, 0.0]}
    alike = {0: [1.0, 0.0, 1.0, 0.5, 1.0], 1: [0.0, 1.0, 1.0, 0.5, 0.0]}
    arms = [bench.Arm("recipe", ()), bench.Arm("lower", ("x=1",)), bench.Arm("alike", ("y=1",))]
    runs = {}
    for arm, f1s in zip(arms, (first, lower, alike), strict=True):
        for seed, values in f1s.items():
            run = write_run(tmp_path, f"{arm.name}-seed{seed}", values, seconds=100.0 if arm.name == "recipe" else 80.0)
            runs[(arm.name, seed)] = bench.run_record(arm, seed, run, reused=False)

    result = bench.compare(arms, [0, 1], runs)

    by = {(v["arm"], v["seed"]): v for v in result["versus_first_arm"]}
    for seed in (0, 1):
        expected, expected_se = mean_se([b - a for a, b in zip(first[seed], lower[seed], strict=True)])
        assert by[("lower", seed)]["difference"] == pytest.approx(expected)
        assert by[("lower", seed)]["paired_se"] == pytest.approx(expected_se)
        assert by[("lower", seed)]["tasks"] == 5 and by[("lower", seed)]["time_ratio"] == pytest.approx(0.8)
        assert not by[("lower", seed)]["within_one_se"]
    assert by[("alike", 0)]["difference"] == 0 and by[("alike", 0)]["within_one_se"]
    assert by[("alike", 1)]["difference"] == pytest.approx(-0.1) and not by[("alike", 1)]["within_one_se"]
    over = result["arms_over_seeds"]
    means = [sum(first[s]) / 5 for s in (0, 1)]
    assert over["recipe"]["f1_mean"] == pytest.approx(sum(means) / 2) and "difference_mean" not in over["recipe"]
    assert over["lower"]["difference_mean"] == pytest.approx(
        (by[("lower", 0)]["difference"] + by[("lower", 1)]["difference"]) / 2)
    assert not over["alike"]["within_one_se_every_seed"]


def test_a_failed_run_is_left_out_of_the_comparison_not_the_report(bench, tmp_path: Path) -> None:
    arms = [bench.Arm("recipe", ()), bench.Arm("broken", ("x=1",))]
    runs = {("recipe", 0): bench.run_record(arms[0], 0, write_run(tmp_path, "recipe-seed0", [1.0, 0.0]), reused=True),
            ("broken", 0): {"arm": "broken", "seed": 0, "error": "exit code 1; see broken-seed0.log"}}
    result = bench.compare(arms, [0], runs)
    assert result["versus_first_arm"] == [] and set(result["arms_over_seeds"]) == {"recipe"}


def test_a_time_ratio_only_between_runs_made_together(bench, tmp_path: Path) -> None:
    arms = [bench.Arm("recipe", ()), bench.Arm("new", ("x=1",))]
    made = {("recipe", 0): bench.run_record(arms[0], 0, write_run(tmp_path, "recipe-seed0", [1.0], seconds=90.0),
                                            reused=True),
            ("new", 0): bench.run_record(arms[1], 0, write_run(tmp_path, "new-seed0", [1.0], seconds=30.0), reused=False)}
    (versus,) = bench.compare(arms, [0], made)["versus_first_arm"]
    assert versus["time_ratio"] is None and versus["difference"] == 0
    made[("recipe", 0)] = {**made[("recipe", 0)], "reused": False}
    (versus,) = bench.compare(arms, [0], made)["versus_first_arm"]
    assert versus["time_ratio"] == pytest.approx(30.0 / 90.0)


def test_runs_that_share_no_held_out_task_are_reported_not_compared(bench, tmp_path: Path) -> None:
    arms = [bench.Arm("recipe", ()), bench.Arm("other", ("train.eval_world=dev",))]
    runs = {("recipe", 0): bench.run_record(arms[0], 0, write_run(tmp_path / "a", "recipe-seed0", [1.0]), reused=True),
            ("other", 0): bench.run_record(arms[1], 0, write_run(tmp_path / "b", "other-seed0", [1.0]), reused=True)}
    rows = bench.final_eval_rows(Path(runs[("other", 0)]["run_dir"]))
    (Path(runs[("other", 0)]["run_dir"]) / "eval_after_grpo.jsonl").write_text(
        "".join(json.dumps({**r, "id": "elsewhere"}) + "\n" for r in rows))
    (entry,) = bench.compare(arms, [0], runs)["versus_first_arm"]
    assert "share no held-out task" in entry["error"]


@pytest.mark.timeout(900)
def test_each_arm_and_seed_runs_as_a_quickstart_process_on_one_thread(bench, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    common = [a for o in [f"cache_dir={tmp_path / 'cache'}", *TOY] for a in ("--set", o)]
    arms = ["--arm", "recipe", "--arm", "longer train.sft.steps=3"]

    result = bench.main([*arms, "--seeds", "0", "--parallel", "2", "--runs-dir", str(runs), *common])

    assert "exit_code" not in result, result
    recipe, longer = result["runs"]
    for run, steps in ((recipe, 2), (longer, 3)):
        folder = Path(run["run_dir"])
        config = (folder / "config.yaml").read_text()
        assert f"steps: {steps}" in config and "seed: 0" in config
        assert set(run["threads"].values()) == {1}, "every stage on the one torch thread the bench gives it"
        assert json.loads((folder / "summary.json").read_text())["after_grpo"]["f1"] == run["f1"]
        assert not run["reused"] and (runs / f"{run['arm']}-seed0.log").is_file()
    (versus,) = result["versus_first_arm"]
    rows = {name: {r["id"]: r["f1"] for r in bench.final_eval_rows(Path(r["run_dir"]))}
            for name, r in (("recipe", recipe), ("longer", longer))}
    assert versus["difference"] == pytest.approx(
        sum(rows["longer"][i] - rows["recipe"][i] for i in rows["recipe"]) / len(rows["recipe"]))
    assert json.loads((runs / "bench_quickstart.json").read_text())["runs"] == result["runs"]

    with pytest.raises(ConfigError, match=r"train\.sft\.steps=3 \(the arm: 4\)"):
        bench.main(["--arm", "recipe", "--arm", "longer train.sft.steps=4", "--seeds", "0", "--runs-dir", str(runs),
                    "--reuse", *common])

    again = bench.main([*arms, "--arm", "broken train.no_such_key=1", "--seeds", "0", "--runs-dir", str(runs),
                        "--reuse", *common])

    assert [r.get("reused") for r in again["runs"][:2]] == [True, True]
    assert again["runs"][:2] == [{**r, "reused": True} for r in result["runs"]]
    broken = again["runs"][2]
    assert broken["arm"] == "broken" and "broken-seed0.log" in broken["error"] and again["exit_code"] == 1
    assert "no_such_key" in (runs / "broken-seed0.log").read_text()
