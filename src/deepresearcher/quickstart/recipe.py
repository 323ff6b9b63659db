"""The quickstart: from nothing to an agent that researched its way to better answers, on a laptop.

Steps (each reported with its time)::

    1 world      build (or reuse) the synthetic web and its index
    2 oracle     the scripted oracle researches train tasks with the real tools (SFT data, tokenizer text); the
                 oracle and the first-hit baseline research the held-out tasks (references beside the model)
    3 tokenizer  byte-level BPE on the world's text + a ~1M-parameter Qwen2 model (random weights)
    4 sft        warm start on the oracle's trajectories (observation-token LM loss on)
    5 eval       held-out test tasks, after SFT
    6 grpo       RL against the real tools (TRL GRPOTrainer with our rollout engine)
    7 eval       the same test tasks, after GRPO
    8 report     runs/<name>/report.html, learning_curve.png, and the task type table

With ``--model`` the tokenizer and tiny model are skipped and that checkpoint is trained instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deepresearcher.config import Config
from deepresearcher.errors import ConfigError
from deepresearcher.train.heldout import TYPE_MEAN, EvalResult, evaluate, paired_gain, paired_gain_by_type

logger = logging.getLogger(__name__)

Say = Callable[[str], None]


def tokenizer_corpus(world_dir: Path, tasks: list[dict[str, Any]], episodes: list[Any], limit_pages: int = 4000) -> list[str]:
    """Text the tokenizer learns from: page text, questions, and the oracle's turns and observations."""
    from deepresearcher.web.html import html_to_text
    from deepresearcher.world import iter_pages

    texts: list[str] = []
    for i, page in enumerate(iter_pages(world_dir)):
        if i >= limit_pages:
            break
        texts.append(page.get("title", "") + "\n" + html_to_text(page["html"]))
    texts.extend(t["question"] for t in tasks)
    for episode in episodes:
        for turn in episode.turns:
            texts.append(turn.assistant)
            if turn.observation:
                texts.append(turn.observation)
    return texts


def require_world_data(config: Config) -> None:
    """The quickstart's tokenizer, oracle and held-out worlds exist only for the synthetic world."""
    if any(source.kind != "world" for source in config.train.data):
        raise ConfigError("The quickstart trains on the synthetic world (its tokenizer, oracle and held-out worlds); "
                          "for other questions use `deepresearcher sft --data ...` and `deepresearcher train --data ...`.")


def _bf16_where_native(config: Config, say: Say) -> Config:
    """The quickstart's bf16 autocast makes its steps ~1.4x faster on a CPU with native bf16; where the CPU
    emulates it, the same steps are slower than fp32, so there the quickstart trains in fp32 and says so."""
    from deepresearcher.train import precision

    if not config.train.bf16 or not precision.bf16_is_emulated():
        return config
    say("train.bf16: this CPU has no native bfloat16 (AVX512-BF16, AMX or Arm BF16), where it is slower than "
        "fp32; training in fp32")
    return config.model_copy(update={"train": config.train.model_copy(update={"bf16": False})})


def run_quickstart(config: Config, *, model: str | None = None, say: Say = print) -> dict[str, Any]:
    """Run every step of the quickstart; returns the summary also written into the report."""
    import torch

    from deepresearcher.eval.behaviours import behaviour_record, rates_by_type
    from deepresearcher.inference.device import on_gpu
    from deepresearcher.quickstart.calibration import measure_machine
    from deepresearcher.quickstart.report import write_quickstart_report
    from deepresearcher.quickstart.tiny_model import build_tiny_checkpoint
    from deepresearcher.train.pipeline import run_grpo
    from deepresearcher.train.rollout import Rollouts, score_trajectories
    from deepresearcher.train.run_dir import RunDir
    from deepresearcher.train.tasks import task_sets
    from deepresearcher.train.threads import choose_threads, sft_probe, thread_candidates
    from deepresearcher.warmstart.pipeline import sft_demonstrations, sft_drills
    from deepresearcher.warmstart.sft import train_sft

    config = _bf16_where_native(config, say)
    cfg = config.train
    require_world_data(config)
    if cfg.sft.steps == 0 and model is None:
        raise ConfigError("train.sft.steps=0 skips SFT, so the warm start must come from --model PATH "
                          "(e.g. runs/quickstart/sft_model); a from-scratch model cannot find the tool format by RL.")
    run = RunDir(cfg.runs_dir / cfg.run_name)
    run.write_config(config)
    calibrations = {"start": measure_machine()}  # and after SFT and at the end: the machine's speed during the run
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        timings[name] = round(time.perf_counter() - clock, 1)
        clock = time.perf_counter()
        say(f"[{name}] done in {timings[name]:.1f}s")

    threads: dict[str, int] = {}  # torch threads each stage ran on (train.adapt_threads: chosen by speed)
    default_threads = torch.get_num_threads()
    probe = sft_probe() if cfg.adapt_threads and not on_gpu() else None

    def pick_threads(stage: str) -> None:
        """Before a stage: the faster thread count by a short probe (``train.adapt_threads``), counted in its time."""
        threads[stage] = default_threads if probe is None else choose_threads(probe, thread_candidates(default_threads))
        if threads[stage] != default_threads:
            say(f"[{stage}] torch threads {threads[stage]} (of {default_threads}): faster now by a short probe")

    sets = task_sets(config)
    world_dir, test_tasks, sft_tasks = sets.world_dirs[0], sets.test, sets.sft
    pooled = f" and {len(sets.pooled_dirs)} more unseen world(s) pooled for every task type" if sets.pooled_dirs else ""
    say(f"{len(sets.world_dirs) - (sets.held_out_dir is not None) - len(sets.pooled_dirs)} training world(s) from "
        f"{world_dir}: {len(sft_tasks) + len(sets.grpo)} train tasks, {len(test_tasks)} held-out test tasks"
        f"{f' (world {sets.held_out_dir}{pooled})' if sets.held_out_dir else ''}")
    lap("world")

    rollouts = Rollouts(config, seed=cfg.seed, world_dirs=sets.environments)
    try:
        episodes = rollouts.oracle_episodes(sft_tasks, cfg.sft.snippet_only_fraction, cfg.sft.seed)
        references = scripted_references(config, rollouts, test_tasks)
        say("on the held-out tasks: " + ", ".join(f"{name} F1 {result.by_type()['all']['f1']:.3f}"
                                                  for name, result in references.items()))
        lap("oracle")
        base = Path(model) if model else run.root / "base_model"
        if model is None:
            build_tiny_checkpoint(tokenizer_corpus(world_dir, sft_tasks, episodes), base, cfg.tiny_model, seed=cfg.seed)
            lap("tokenizer+model")
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(base))
        sft_data = sft_demonstrations(config, rollouts, sft_tasks, tokenizer, episodes)
        oracle_scores = score_trajectories(sft_data, sft_tasks, config)
        oracle_f1 = sum(s["f1"] for s in oracle_scores) / len(oracle_scores)
        tokens = sum(len(t.all_ids) for t in sft_data) / len(sft_data)
        say(f"oracle: F1 {oracle_f1:.3f} on {len(sft_data)} train tasks, {tokens:.0f} tokens per episode")
        oracle_behaviours = rates_by_type(behaviour_record(t, task) for t, task in zip(sft_data, sft_tasks, strict=True))
        if cfg.sft.steps:
            sft_dir = run.root / "sft_model"
            sft = train_sft(
                base, sft_data, cfg.sft, sft_dir, bf16=cfg.bf16,
                on_step=lambda step, loss: say(f"sft step {step}/{cfg.sft.steps} loss {loss:.3f}") if step % 25 == 0 else None,
                drills=sft_drills(config, tokenizer), adapt_threads=cfg.adapt_threads,
            )
            threads["sft"] = sft.threads_kept
            say(f"sft: {sft.steps} steps, final loss {sft.final_loss:.3f}, {sft.tokens_per_second:.0f} tokens/s"
                + (f"; torch threads switched {sft.thread_switches} time(s) by speed, "
                   f"{sft.threads_kept} at the end" if sft.thread_switches else ""))
            lap("sft")
            calibrations["after SFT"] = measure_machine()
            clock = time.perf_counter()  # the calibration is not the next step's time
        else:  # train.sft.steps 0: the given model is already the warm start
            sft_dir = base
            say(f"sft: skipped (train.sft.steps=0); GRPO starts from {base}")

        pick_threads("eval_sft")
        after_sft = evaluate(sft_dir, test_tasks, rollouts, config)
        run.write_jsonl("eval_after_sft.jsonl", after_sft.rows)
        say(_format_table("after SFT", after_sft))
        lap("eval_sft")

        after_grpo = None
        if cfg.max_steps:
            pick_threads("grpo")
            result = run_grpo(config, model=sft_dir, rollouts=rollouts, tasks=sets.grpo)
            lap("grpo")

            pick_threads("eval_grpo")
            after_grpo = evaluate(result.model_dir, test_tasks, rollouts, config)
            run.write_jsonl("eval_after_grpo.jsonl", after_grpo.rows)
            say(_format_table("after GRPO", after_grpo))
            lap("eval_grpo")
    finally:
        rollouts.close()
        torch.set_num_threads(default_threads)

    stages = {"after SFT": after_sft, **({"after GRPO": after_grpo} if after_grpo else {})}
    summary: dict[str, Any] = {
        "oracle_f1": oracle_f1,
        "after_sft": after_sft.by_type()["all"],
        "by_type": {stage: result.by_type() for stage, result in stages.items()},
        "eval_tasks": len(test_tasks),
        "eval_world": cfg.eval_world,
        "timings_s": timings,
        "total_s": round(sum(timings.values()), 1),
        "threads": threads,
    }
    notes = [f"Oracle F1 on its SFT tasks: {oracle_f1:.3f}; {summary['total_s']:.0f} s in all (step times below)."]
    if after_grpo is not None:
        gain, se = paired_gain(after_sft, after_grpo)
        gains = paired_gain_by_type(after_sft, after_grpo)
        say(format_gains(gains))
        summary.update(after_grpo=after_grpo.by_type()["all"], f1_gain=gain, f1_gain_se=se,
                       f1_gain_by_type={kind: {"gain": g, "se": e} for kind, (g, e) in gains.items()})
        type_gain = (f"; each type weighing the same {100 * gains[TYPE_MEAN][0]:+.1f} (SE {100 * gains[TYPE_MEAN][1]:.1f})"
                     if TYPE_MEAN in gains else "")
        notes.insert(0,
            f"F1 gain from GRPO: {100 * gain:+.1f} points (paired SE {100 * se:.1f}) on {len(test_tasks)} held-out "
            f"tasks, each task weighing the same{type_gain}; format-error rate "
            f"{after_sft.by_type()['all']['format_errors']:.3f} after SFT, "
            f"{after_grpo.by_type()['all']['format_errors']:.3f} after GRPO.")
    summary = write_quickstart_report(run, config, summary=summary, stages=stages, train_tasks=sft_tasks + sets.grpo,
                                      test_tasks=test_tasks, timings=timings, calibrations=calibrations,
                                      notes=notes, say=say, oracle_behaviours=oracle_behaviours,
                                      references=references)
    return summary


REFERENCES = ("oracle", "first-hit baseline")
"""The scripted researchers the quickstart runs on its held-out tasks, beside the model."""


def scripted_references(config: Config, rollouts: Any, tasks: list[dict[str, Any]]) -> dict[str, EvalResult]:
    """The oracle (``train.oracle``: reads the best reliable page, and both pages where an unreliable site shows)
    and the first-hit baseline (``eval.scripted``: answers from the first hit's page) on ``tasks`` with the real
    tools, each episode a held-out row as the model's are (scores and behaviours)."""
    from deepresearcher.eval.scripted import FirstHitResearcher, scripted_trajectories
    from deepresearcher.train.heldout import heldout_row
    from deepresearcher.train.oracle import OracleResearcher
    from deepresearcher.train.rollout import score_trajectory

    terse, order = config.train.compact_prompt, config.train.sft.two_entity_order
    makers = {"oracle": lambda box: OracleResearcher(box, terse=terse, two_entity_order=order),
              "first-hit baseline": lambda box: FirstHitResearcher(box, terse=terse)}
    out = {}
    for name in REFERENCES:
        trajectories = rollouts.loop.run_until_complete(scripted_trajectories(makers[name], tasks, rollouts.toolbox))
        out[name] = EvalResult([heldout_row(task, trajectory, score_trajectory(trajectory, task, config))
                                for task, trajectory in zip(tasks, trajectories, strict=True)])
    return out


def _format_table(title: str, result: EvalResult) -> str:
    """The evaluation by task type, each figure ± its standard error; ``type_mean`` weighs every type the
    same, ``all`` every task."""
    lines = [f"{title} (± standard error; type_mean: each type weighs the same, all: each task):",
             f"  {'type':<14}{'n':>6}{'success':>15}{'F1':>15}{'fmt-err':>15}{'tools':>13}"]
    for kind, s in result.by_type().items():
        lines.append(f"  {kind:<14}{s['n']:>6}" + "".join(
            f"{s[key]:>{width}.{digits}f}±{s[key + '_se']:<{digits + 2}.{digits}f}"
            for key, width, digits in (("success", 9, 3), ("f1", 9, 3), ("format_errors", 9, 3), ("tool_calls", 8, 2))))
    return "\n".join(lines)


def format_gains(gains: dict[str, tuple[float, float]]) -> str:
    """The paired F1 gain of each task type in points, ± its standard error."""
    return "F1 gain from GRPO by task type (points, ± paired SE): " + ", ".join(
        f"{kind} {100 * gain:+.1f}±{100 * se:.1f}" for kind, (gain, se) in gains.items())

