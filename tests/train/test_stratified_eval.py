"""The stratified held-out set: as many tasks of every type, pooled from unseen worlds where one world is
short, never a training task; each per-type figure with its standard error."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from deepresearcher.config import load_config
from deepresearcher.errors import ConfigError
from deepresearcher.train.heldout import ALL, TYPE_MEAN, EvalResult, paired_gain, paired_gain_by_type
from deepresearcher.train.stratify import balanced_cycle, balanced_split, per_type_quota, stratify
from deepresearcher.train.tasks import held_out_seed, pooled_world_seeds, task_sets
from deepresearcher.world import load_manifest, load_tasks


def _base(tmp_path: Path, *more: str) -> list[str]:
    return [f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", "train.num_worlds=2", "train.sft.num_tasks=20", *more]


@pytest.mark.timeout(120)
def test_every_type_gets_its_quota_from_pooled_unseen_worlds_and_no_training_task(tmp_path: Path) -> None:
    """The tiny held-out world has 3 unanswerable and 8 conflict tasks: 12 of each type need pooled worlds,
    which are neither training worlds nor the dev world, and hold no task the run trains on."""
    config = load_config(None, _base(tmp_path, "train.eval_per_type=12", "train.eval_tasks=1000"))
    sets = task_sets(config)
    held_out = Counter(t.type for split in ("train", "dev", "test") for t in load_tasks(sets.held_out_dir, split))
    assert held_out["unanswerable"] < 12, "the test needs a held-out world short of one type"
    assert Counter(t["type"] for t in sets.test) == {kind: 12 for kind in held_out}
    assert sets.pooled_dirs and sets.world_dirs == [*sets.world_dirs[:2], sets.held_out_dir, *sets.pooled_dirs]

    seeds = [load_manifest(d)["seed"] for d in sets.world_dirs]
    training, evaluated = set(seeds[:2]), seeds[2:]
    dev_seed = held_out_seed(config.model_copy(update={"train": config.train.model_copy(update={"eval_world": "dev"})}))
    assert not training & set(evaluated) and dev_seed not in evaluated
    assert evaluated[1:] == pooled_world_seeds(config, len(sets.pooled_dirs))
    assert {t["world"] for t in sets.test} <= set(range(2, len(sets.world_dirs)))
    assert {t["world"] for t in sets.sft + sets.grpo} == {0, 1}
    trained = {t["id"] for t in sets.sft + sets.grpo}
    assert not trained & {t["id"] for t in sets.test}
    assert len({t["id"] for t in sets.test}) == len(sets.test)
    for task in sets.test:  # each task is answered in the world that asked it
        world = sets.world_dirs[task["world"]]
        assert task["id"] in {t.id for split in ("train", "dev", "test") for t in load_tasks(world, split)}


def test_dev_and_test_pools_never_share_a_world_and_eval_tasks_still_bounds_the_set(tmp_path: Path) -> None:
    config = load_config(None, _base(tmp_path, "train.eval_per_type=12"))
    dev = config.model_copy(update={"train": config.train.model_copy(update={"eval_world": "dev"})})
    test_worlds = {held_out_seed(config), *pooled_world_seeds(config, 8)}
    dev_worlds = {held_out_seed(dev), *pooled_world_seeds(dev, 8)}
    assert not test_worlds & dev_worlds
    assert min(test_worlds | dev_worlds) >= config.world.seed + config.train.num_worlds

    small = task_sets(load_config(None, _base(tmp_path, "train.eval_per_type=100", "train.eval_tasks=15")))
    counts = Counter(t["type"] for t in small.test)
    assert len(small.test) == 15 and max(counts.values()) - min(counts.values()) <= 1 and len(counts) == 7
    assert not small.pooled_dirs, "3 of each type are in the held-out world itself"


def test_eval_per_type_0_draws_at_random_in_the_worlds_own_mix(tmp_path: Path) -> None:
    sets = task_sets(load_config(None, _base(tmp_path, "train.eval_per_type=0", "train.eval_tasks=120")))
    counts = Counter(t["type"] for t in sets.test)
    assert len(sets.test) == 120 and not sets.pooled_dirs and counts["hop1"] > 3 * counts.get("comparison", 0)


def test_stratify_interleaves_types_so_any_head_is_balanced() -> None:
    tasks = [{"id": f"{kind}{i}", "type": kind} for kind, n in (("a", 5), ("b", 2), ("c", 9)) for i in range(n)]
    picked = stratify(tasks, 3)
    assert [t["id"] for t in picked] == ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "c2"]
    assert per_type_quota(100, 1000, 7) == 100 and per_type_quota(200, 1000, 7) == 143 and per_type_quota(5, 6, 7) == 1


def _rows(kind: str, f1: list[float], errors: list[int], tools: list[int]) -> list[dict]:
    return [{"id": f"{kind}{i}", "type": kind, "f1": x, "format_error": e, "tool_calls": c}
            for i, (x, e, c) in enumerate(zip(f1, errors, tools, strict=True))]


def test_each_figure_has_its_standard_error_and_the_type_mean_weighs_types_equally() -> None:
    result = EvalResult(_rows("a", [1.0, 0.0, 1.0, 0.0], [0, 0, 0, 1], [2, 4, 2, 4]) + _rows("b", [0.5, 0.5], [0, 0], [1, 1]))
    by_type = result.by_type()
    assert list(by_type) == ["a", "b", TYPE_MEAN, ALL]
    a = by_type["a"]
    assert a["f1"] == 0.5 and a["f1_se"] == pytest.approx(math.sqrt(1 / 3) / 2)  # sample sd sqrt(1/3), n 4
    assert a["success_se"] == pytest.approx(math.sqrt(0.5 * 0.5 / 4))  # binomial
    assert a["format_errors_se"] == pytest.approx(math.sqrt(0.25 * 0.75 / 4))
    assert a["tool_calls_se"] == pytest.approx(math.sqrt(4 / 3) / 2)
    assert by_type["b"]["f1_se"] == 0.0
    mean = by_type[TYPE_MEAN]
    assert mean["f1"] == pytest.approx(0.5) and mean["format_errors"] == pytest.approx(0.125)
    assert mean["f1_se"] == pytest.approx(math.sqrt(a["f1_se"] ** 2 + 0.0) / 2) and mean["n"] == 6
    assert by_type[ALL]["format_errors"] == pytest.approx(1 / 6), "all weighs every task the same"


def test_paired_gain_per_type_uses_the_same_tasks() -> None:
    before = EvalResult(_rows("a", [0.0, 0.0, 1.0], [0, 0, 0], [1, 1, 1]) + _rows("b", [0.5, 0.5], [0, 0], [1, 1]))
    after = EvalResult(_rows("a", [1.0, 0.0, 1.0], [0, 0, 0], [1, 1, 1]) + _rows("b", [0.5, 1.0], [0, 0], [1, 1]))
    gains = paired_gain_by_type(before, after)
    assert gains["a"] == pytest.approx((1 / 3, math.sqrt(1 / 3) / math.sqrt(3)))
    assert gains["b"] == pytest.approx((0.25, math.sqrt(0.125) / math.sqrt(2)))
    assert gains[TYPE_MEAN][0] == pytest.approx((1 / 3 + 0.25) / 2)
    assert gains[TYPE_MEAN][1] == pytest.approx(math.sqrt(gains["a"][1] ** 2 + gains["b"][1] ** 2) / 2)
    assert gains[ALL] == paired_gain(before, after) and gains[ALL][0] == pytest.approx(1.5 / 5)


def test_the_quickstart_tables_print_every_figure_with_its_standard_error() -> None:
    from deepresearcher.quickstart.recipe import _format_table, format_gains

    result = EvalResult(_rows("hop1", [1.0, 0.0, 1.0, 0.0], [0, 0, 0, 1], [2, 4, 2, 4]) + _rows("two_page", [0.5, 0.5], [0, 0], [1, 1]))
    table = _format_table("after GRPO", result)
    hop1 = next(line for line in table.splitlines() if line.strip().startswith("hop1"))
    assert "0.500±0.289" in hop1 and "0.250±0.217" in hop1 and "3.00±0.58" in hop1
    assert any(line.strip().startswith(TYPE_MEAN) for line in table.splitlines())
    assert "hop1 +50.0±28.9" in format_gains({"hop1": (0.5, 0.2887)})


def test_eval_per_type_output_carries_the_policy_standard_error() -> None:
    from deepresearcher.eval.baselines import fit_baselines, margin_rows, model_f1_se_by_type
    from deepresearcher.eval.report import baseline_tables

    train = [{"id": f"t{i}", "type": "hop1", "question": f"Q{i}?", "golds": ["x"], "answerable": True} for i in range(4)]
    test = [{"id": f"e{i}", "type": "hop1", "question": f"E{i}?", "golds": ["x"], "answerable": True} for i in range(4)]
    rows = [{"id": f"e{i}", "f1": float(i % 2)} for i in range(4)]
    se = model_f1_se_by_type(rows, {t["id"]: "hop1" for t in test})
    assert se["hop1"] == pytest.approx(math.sqrt(1 / 3) / 2) and se["all"] == se["hop1"]
    report = fit_baselines(train).evaluate(test)
    assert margin_rows(report, {"policy": {"hop1": 0.5, "all": 0.5}}, {"policy": se})[0]["policy SE"] == se["hop1"]
    section = report.to_dict(model_f1={"hop1": 0.5, "all": 0.5}, model_f1_se=se)
    [(_, table)] = baseline_tables({"baselines": {"world:test": section}})
    assert "policy SE" in table.columns and "28.9" in table.rows[0]


def test_the_run_report_shows_the_final_held_out_evaluation_with_standard_errors(tmp_path: Path) -> None:
    from deepresearcher.config import Config
    from deepresearcher.train.report import heldout_tables, write_report
    from deepresearcher.train.run_dir import RunDir

    run = RunDir(tmp_path / "run")
    run.write_config(Config())
    assert heldout_tables(run) == {}, "a run evaluated on nothing has no such table"
    result = EvalResult(_rows("hop1", [1.0, 0.0, 1.0, 0.0], [0, 0, 0, 1], [2, 4, 2, 4]) + _rows("two_page", [0.5, 0.5], [0, 0], [1, 1]))
    run.write_json("heldout.json", result.by_type())
    [(heading, rows)] = heldout_tables(run).items()
    assert [r["type"] for r in rows] == ["hop1", "two_page", TYPE_MEAN, ALL] and rows[0]["f1_se"] == pytest.approx(0.2887, abs=1e-4)
    page = write_report(run, tables=heldout_tables(run)).read_text()
    assert "<th>f1_se</th>" in page and "<td>0.289</td>" in page and "each task type weighs the same" in page


def test_balanced_cycle_gives_every_type_the_same_share_and_repeats_the_rare_ones() -> None:
    tasks = [{"id": f"{kind}{i}", "type": kind} for kind, n in (("a", 12), ("b", 2), ("c", 7)) for i in range(n)]
    picked = balanced_cycle(tasks)
    assert len(picked) == len(tasks)
    assert Counter(t["type"] for t in picked) == {"a": 7, "b": 7, "c": 7}
    assert [t["id"] for t in picked[:9]] == ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b0", "c2"]
    assert [t["repeat"] for t in picked[:9]] == [0, 0, 0, 0, 0, 0, 0, 1, 0]
    firsts = [t for t in picked if not t["repeat"]]
    assert sorted(t["id"] for t in firsts) == sorted(f"{kind}{i}" for kind, n in (("a", 7), ("b", 2), ("c", 7)) for i in range(n))


def test_baselines_fit_a_repeated_task_once() -> None:
    """Repeats of a balanced prompt order would count a task twice and land in both cross-fitting halves."""
    from deepresearcher.eval.baselines import fit_baselines

    tasks = [{"id": f"t{i}", "type": "hop1", "golds": ["x" if i < 3 else "y"], "chain": []} for i in range(4)]
    repeats = [{**tasks[3], "id": f"t3#{k}", "repeat": k} for k in range(1, 6)]
    assert fit_baselines(tasks + repeats).guesses == fit_baselines(tasks).guesses
    assert fit_baselines(tasks + [{**r, "repeat": 0} for r in repeats]).guesses != fit_baselines(tasks).guesses


def test_balanced_prompt_mix_trains_the_rare_types_as_often_as_the_common_ones(tmp_path: Path) -> None:
    natural = task_sets(load_config(None, _base(tmp_path)))
    balanced = task_sets(load_config(None, _base(tmp_path, "train.prompt_mix=balanced")))
    assert natural.sft == balanced.sft, "the mix changes GRPO's prompts only"
    assert len(balanced.grpo) == len(natural.grpo)
    natural_counts = Counter(t["type"] for t in natural.grpo)
    counts = Counter(t["type"] for t in balanced.grpo)
    assert natural_counts["unanswerable"] * 3 < natural_counts["hop1"], "the tiny world's mix is skewed"
    assert max(counts.values()) - min(counts.values()) <= 1 and set(counts) == set(natural_counts)
    assert len({t["id"] for t in balanced.grpo}) == len(balanced.grpo), "repeated tasks get their own ids"
    assert {t["id"].split("#")[0] for t in balanced.grpo} <= {t["id"] for t in natural.grpo}


def test_prompt_types_keep_grpo_to_the_named_types_and_leave_sft_and_the_held_out_set_whole(tmp_path: Path) -> None:
    pair = "train.prompt_types=[two_page,comparison]"
    every = task_sets(load_config(None, _base(tmp_path)))
    chosen = task_sets(load_config(None, _base(tmp_path, pair)))
    assert [t["id"] for t in chosen.grpo] == [t["id"] for t in every.grpo if t["type"] in ("two_page", "comparison")]
    assert chosen.sft == every.sft and chosen.test == every.test
    balanced = Counter(t["type"] for t in task_sets(load_config(None, _base(tmp_path, pair, "train.prompt_mix=balanced"))).grpo)
    assert set(balanced) == {"two_page", "comparison"} and abs(balanced["two_page"] - balanced["comparison"]) <= 1
    with pytest.raises(ConfigError, match="unknown task type.*two_pages"):
        load_config(None, _base(tmp_path, "train.prompt_types=[two_pages]"))
    with pytest.raises(ConfigError, match="empty"):
        load_config(None, _base(tmp_path, "train.prompt_types=[]"))
    with pytest.raises(ConfigError, match="nq.*drop one"):
        load_config(None, _base(tmp_path, pair, "train.data=[world, nq:train]"))


def test_balanced_split_gives_sft_every_type_equally_and_leaves_half_of_a_rare_type_to_grpo() -> None:
    tasks = [{"id": f"{kind}{i}", "type": kind} for kind, n in (("a", 30), ("b", 4), ("c", 9)) for i in range(n)]
    sft, rest = balanced_split(tasks, 12)
    assert Counter(t["type"] for t in sft) == {"a": 4, "b": 4, "c": 4}
    assert sorted(t["id"] for t in sft if not t["repeat"]) == ["a0", "a1", "a2", "a3", "b0", "b1", "c0", "c1", "c2", "c3"]
    assert [t["id"] for t in sft if t["type"] == "b"] == ["b0", "b1", "b0", "b1"], "a rare type's demonstrations recur"
    assert Counter(t["type"] for t in rest) == {"a": 26, "b": 2, "c": 5}
    assert not {t["id"] for t in sft} & {t["id"] for t in rest}
    assert [t["id"] for t in rest] == [t["id"] for t in tasks if t["id"] not in {s["id"] for s in sft}], "GRPO keeps the order"


def test_balanced_sft_mix_demonstrates_the_rare_types_and_never_shares_a_task_with_grpo(tmp_path: Path) -> None:
    natural = task_sets(load_config(None, _base(tmp_path, "train.sft.num_tasks=70")))
    balanced = task_sets(load_config(None, _base(tmp_path, "train.sft.num_tasks=70", "train.sft.task_mix=balanced")))
    natural_counts, counts = Counter(t["type"] for t in natural.sft), Counter(t["type"] for t in balanced.sft)
    assert natural_counts["unanswerable"] * 3 < natural_counts["hop1"], "the tiny world's mix is skewed"
    assert len(balanced.sft) == 70 and max(counts.values()) - min(counts.values()) <= 1
    sft_ids = {t["id"] for t in balanced.sft}
    assert not sft_ids & {t["id"] for t in balanced.grpo}
    assert {t["type"] for t in balanced.grpo} == set(counts), "every type is still among GRPO's prompts"
    assert balanced.test == natural.test
    repeated = [t for t in balanced.sft if t["repeat"]][:3]
    firsts = [next(s for s in balanced.sft if s["id"] == t["id"] and not s["repeat"]) for t in repeated]
    assert repeated, "the tiny worlds' rare types recur among 70 balanced demonstrations"
    from deepresearcher.train.rollout import Rollouts

    rollouts = Rollouts(load_config(None, _base(tmp_path)), world_dirs=balanced.environments)
    try:  # a repeated task is a demonstration like its first occurrence
        episodes = rollouts.oracle_episodes(firsts + repeated)
    finally:
        rollouts.close()
    assert [e.answer for e in episodes[: len(firsts)]] == [e.answer for e in episodes[len(firsts):]]
    assert all(e.answer for e in episodes)
