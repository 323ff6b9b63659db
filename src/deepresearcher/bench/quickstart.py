"""Quickstart recipes compared over seeds run alike: is a cheaper recipe's held-out F1 the same?

One quickstart per seed measures the warm start that seed happened to get: the recipe's seed 1 reached F1 0.759
on one torch thread and 0.576 on two (the same code; a step on one thread rounds differently), eleven to twelve
standard errors apart. So a recipe is compared here the only way that holds: every (arm, seed) is its own
``deepresearcher quickstart`` process on one torch thread (every arm alike, none switching threads), ``--parallel`` of them
at a time, and each arm is compared with the first arm seed by seed on the same held-out tasks (the held-out set is
drawn by seed, so two arms of one seed evaluate the same tasks): the paired difference of F1, its paired standard
error, and whether the arm is within one standard error of the first arm's run (not lower by more than that run's
SE, the quickstart's bar for a cheaper recipe), then the same over the seeds. Each run's time, normalised time
and calibration are beside it; runs made in parallel share the cores, so their seconds compare with each other, not
with a run made alone, and an arm's time ratio is given only against a first-arm run made in the same invocation.

    deepresearcher bench quickstart --arm recipe --arm "b12 train.sft.batch_size=12" --seeds 0,1 --parallel 4
    deepresearcher bench quickstart --arm recipe --arm "steps16 train.max_steps=16" --set train.eval_world=dev

An arm is ``NAME`` then its ``key=value`` overrides, separated by spaces; ``--set`` overrides apply to every arm
(tune on the dev world: ``--set train.eval_world=dev``). Run folders are ``RUNS_DIR/NAME-seedN`` with a log beside
each; ``--reuse`` takes a run whose folder already holds its results instead of running it again (an arm measured
once with the same code need not run twice). A run that fails is reported with its log and
the others still are; the benchmark then exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepresearcher.errors import ConfigError
from deepresearcher.train.heldout import EvalResult, mean_se, paired_gain

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_EVAL_FILES = ("eval_after_grpo.jsonl", "eval_after_sft.jsonl")
"""A run's held-out rows, its last evaluation first (after GRPO, or after SFT when GRPO was skipped)."""


@dataclass(frozen=True)
class Arm:
    """One recipe: a name (its runs' folder prefix) and the overrides that make it."""

    name: str
    overrides: tuple[str, ...]


def parse_arm(spec: str) -> Arm:
    """``"NAME key=value ..."`` as an :class:`Arm`; a clear error for a spec that is not one."""
    name, *overrides = spec.split() or [""]
    if not _NAME.match(name):
        raise ConfigError(f"--arm {spec!r}: start with the arm's name (letters, digits, '_', '.', '-'), then its "
                          "key=value overrides, e.g. --arm \"b12 train.sft.batch_size=12\".")
    for override in overrides:
        if "=" not in override:
            raise ConfigError(f"--arm {spec!r}: {override!r} is not key=value.")
    return Arm(name, tuple(overrides))


def quickstart_command(config: str, arm: Arm, seed: int, runs_dir: Path, common: list[str]) -> list[str]:
    """The ``deepresearcher quickstart`` process of one (arm, seed): the arm's overrides after the common ones."""
    overrides = [*common, f"train.seed={seed}", f"train.sft.seed={seed}", f"train.runs_dir={runs_dir}",
                 f"train.run_name={arm.name}-seed{seed}", *arm.overrides]
    return [sys.executable, "-m", "deepresearcher.cli.main", "quickstart", "--config", config,
            *[part for override in overrides for part in ("--set", override)]]


def final_eval_rows(run_dir: Path) -> list[dict[str, Any]]:
    """The held-out rows of a run's last evaluation (after GRPO, or after SFT when GRPO was skipped)."""
    path = next(run_dir / name for name in _EVAL_FILES if (run_dir / name).is_file())
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def made_otherwise(run_dir: Path, overrides: list[str]) -> list[str]:
    """The ``key=value`` overrides (in the order they apply) that ``run_dir``'s saved config does not hold: a run of
    another recipe under the same name is not reused as this arm's. Both sides go through ``load_config``, so a
    value is compared as the config types it (``1e-4`` and ``0.0001`` agree)."""
    from functools import reduce

    from deepresearcher.config import load_config

    saved = load_config(run_dir / "config.yaml")
    wanted = load_config(run_dir / "config.yaml", overrides)
    differing = []
    for key in dict.fromkeys(override.partition("=")[0] for override in overrides):
        have, want = (reduce(getattr, key.split("."), config) for config in (saved, wanted))
        if have != want:
            differing.append(f"{key}={have!r} (the arm: {want!r})")
    return differing


def has_results(run_dir: Path) -> bool:
    return (run_dir / "summary.json").is_file() and any((run_dir / name).is_file() for name in _EVAL_FILES)


def run_record(arm: Arm, seed: int, run_dir: Path, *, reused: bool) -> dict[str, Any]:
    """What one finished run measured, read from its folder."""
    summary = json.loads((run_dir / "summary.json").read_text())
    final = summary.get("after_grpo") or summary["after_sft"]
    return {
        "arm": arm.name, "seed": seed, "run_dir": str(run_dir), "reused": reused,
        "f1_after_sft": summary["after_sft"]["f1"], "f1": final["f1"], "f1_se": final["f1_se"],
        "gain": summary.get("f1_gain"), "gain_se": summary.get("f1_gain_se"), "n": final["n"],
        "total_s": summary["total_s"], "total_normalised_s": summary.get("total_normalised_s"),
        "calibration_start": summary["calibration"]["sft_tokens_per_second"], "threads": summary.get("threads"),
    }


def paired_difference(first: list[dict[str, Any]], other: list[dict[str, Any]]) -> tuple[float, float, int]:
    """Mean F1 difference (other − first) over the tasks both evaluated, its paired standard error, and their count."""
    shared = {row["id"] for row in first} & {row["id"] for row in other}
    if not shared:
        raise ConfigError("the two runs share no held-out task: compare arms that keep the held-out set "
                          "(train.eval_world, train.eval_tasks, train.eval_per_type alike).")
    difference, se = paired_gain(EvalResult(first), EvalResult(other))
    return difference, se, len(shared)


def together(base: dict[str, Any], run: dict[str, Any]) -> float | None:
    """``run``'s seconds over ``base``'s where both ran in this invocation; None when either was reused: runs made
    at another load (alone, or four at once) differ by the load, and their calibrations, taken at three moments,
    do not even it out (the recipe's seed 0 normalised to 1,733 s four at once, its seed 2 to 1,200 s two at once)."""
    if base["reused"] or run["reused"]:
        return None
    return run["total_s"] / base["total_s"]


def compare(arms: list[Arm], seeds: list[int], runs: dict[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    """Each arm against the first, seed by seed (paired on the held-out tasks) and over the seeds; ``runs`` holds
    every (arm, seed) of ``arms`` and ``seeds``: its record, or its error."""
    first = arms[0].name
    versus: list[dict[str, Any]] = []
    for arm in arms[1:]:
        for seed in seeds:
            base, run = runs[(first, seed)], runs[(arm.name, seed)]
            if "error" in base or "error" in run:
                continue
            try:
                difference, se, n = paired_difference(final_eval_rows(Path(base["run_dir"])),
                                                      final_eval_rows(Path(run["run_dir"])))
            except ConfigError as exc:
                versus.append({"arm": arm.name, "seed": seed, "error": str(exc)})
                continue
            versus.append({"arm": arm.name, "seed": seed, "difference": difference, "paired_se": se, "tasks": n,
                           "first_arm_se": base["f1_se"], "within_one_se": difference >= -base["f1_se"],
                           "time_ratio": together(base, run)})
    over_seeds: dict[str, Any] = {}
    for arm in arms:
        done = [run for seed in seeds if "error" not in (run := runs[(arm.name, seed)])]
        if not done:
            continue
        f1, f1_se = mean_se([r["f1"] for r in done])
        entry: dict[str, Any] = {"seeds": len(done), "f1_mean": f1, "f1_se_over_seeds": f1_se,
                                 "f1_min": min(r["f1"] for r in done), "f1_max": max(r["f1"] for r in done)}
        pairs = [v for v in versus if v["arm"] == arm.name and "error" not in v]
        if pairs:
            difference, se = mean_se([v["difference"] for v in pairs])
            ratios = [v["time_ratio"] for v in pairs if v["time_ratio"] is not None]
            entry.update(difference_mean=difference, difference_se_over_seeds=se,
                         within_one_se_every_seed=all(v["within_one_se"] for v in pairs),
                         time_ratio_mean=sum(ratios) / len(ratios) if ratios else None)
        over_seeds[arm.name] = entry
    return {"versus_first_arm": versus, "arms_over_seeds": over_seeds}


def _run_one(command: list[str], log: Path) -> int:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with log.open("w") as out:
        return subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, check=False).returncode


def main(argv: list[str]) -> dict[str, Any]:
    from rich.console import Console
    from rich.progress import Progress

    parser = argparse.ArgumentParser(prog="deepresearcher bench quickstart", description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", action="append", required=True,
                        help='"NAME key=value ..." (repeat; the first arm is what the others are compared with).')
    parser.add_argument("--seeds", default="0,1", help="Comma-separated seeds (train.seed and train.sft.seed).")
    parser.add_argument("--config", default="quickstart", help="Recipe every arm starts from.")
    parser.add_argument("--set", dest="common", action="append", default=[], help="key=value for every arm.")
    parser.add_argument("--parallel", type=int, default=2, help="Runs at once, one torch thread each.")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs/bench-quickstart"))
    parser.add_argument("--reuse", action="store_true", help="Take a run whose folder already holds its results.")
    args = parser.parse_args(argv)

    arms = [parse_arm(spec) for spec in args.arm]
    if len({arm.name for arm in arms}) != len(arms):
        raise ConfigError(f"--arm names must differ: {[arm.name for arm in arms]}.")
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"--seeds {args.seeds!r}: comma-separated integers, e.g. --seeds 0,1.") from None
    if not seeds or args.parallel < 1:
        raise ConfigError("--seeds needs at least one seed and --parallel at least 1.")
    runs_dir = args.runs_dir.resolve()
    runs_dir.mkdir(parents=True, exist_ok=True)

    jobs = [(arm, seed) for seed in seeds for arm in arms]  # seed-major: an arm's first pair finishes early
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    todo = []
    for arm, seed in jobs:
        run_dir = runs_dir / f"{arm.name}-seed{seed}"
        if args.reuse and has_results(run_dir):
            differing = made_otherwise(run_dir, [f"train.seed={seed}", *args.common, *arm.overrides])
            if differing:
                raise ConfigError(f"--reuse: {run_dir} was made with {', '.join(differing)}; name the arm "
                                  "differently or remove that folder.")
            runs[(arm.name, seed)] = run_record(arm, seed, run_dir, reused=True)
        else:
            todo.append((arm, seed, run_dir))

    def run(job: tuple[Arm, int, Path]) -> None:
        arm, seed, run_dir = job
        log = runs_dir / f"{arm.name}-seed{seed}.log"
        code = _run_one(quickstart_command(args.config, arm, seed, runs_dir, args.common), log)
        if code == 0 and has_results(run_dir):
            runs[(arm.name, seed)] = run_record(arm, seed, run_dir, reused=False)
        else:
            runs[(arm.name, seed)] = {"arm": arm.name, "seed": seed, "error": f"exit code {code}; see {log}"}

    progress = Progress(console=Console(stderr=True), transient=True)  # stdout is the JSON
    with progress, ThreadPoolExecutor(max_workers=args.parallel) as pool:
        task = progress.add_task(f"{len(todo)} quickstart run(s), {args.parallel} at a time", total=len(todo))
        for _ in pool.map(run, todo):
            progress.advance(task)

    result: dict[str, Any] = {
        "config": args.config, "common_overrides": args.common, "seeds": seeds,
        "arms": {arm.name: list(arm.overrides) for arm in arms}, "parallel": args.parallel,
        "runs": [runs[(arm.name, seed)] for arm, seed in jobs],
        **compare(arms, seeds, runs),
    }
    if any("error" in entry for entry in result["runs"] + result["versus_first_arm"]):
        result["exit_code"] = 1
    (runs_dir / "bench_quickstart.json").write_text(json.dumps(result, indent=2))
    return result
