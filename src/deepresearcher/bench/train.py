"""Training throughput of the quickstart model on this machine, and TRL's overhead over the raw work.

Workload: the quickstart's tiny Qwen2 (tokenizer trained on a tiny world + oracle turns), random
weights, ``--prompts`` x ``--group`` rollouts per step against the real local environment.

* ``rollout_tokens_per_s``: tokens of finished episodes (sampled + observations) per second of rollout
  (``policy_tokens_per_s``: the sampled ones alone);
* ``train_tokens_per_s``: tokens per second of forward+backward (plus the reference forward) on those episodes;
* ``trl_s_per_step``: wall time of one ``GRPOTrainer`` step (rollouts included), median of ``--steps``;
* ``raw_s_per_step``: the same rollouts, reference forward and micro-batched forward/backward with our own
  ``grpo_loss``, no trainer; ``trl_overhead`` = trl / raw − 1 (target: < 0.30).

    deepresearcher bench train --json
    deepresearcher bench train --prompts 4 --group 16 --steps 3

``--slow-tools``: synchronous against asynchronous GRPO (``train.async_grpo``) when every tool call waits a
lognormal delay (``env.latency``; median 1 s, p99 15 s by default), from the same warm start on the same seed
and the same config (``--config``, default the quickstart's). Each run checkpoints every ``--eval-every``
steps; afterwards each checkpoint is evaluated on ``--eval-tasks`` held-out tasks without the delay (greedy),
so the curve is held-out F1 against the training wall time at which the checkpoint was taken. Prints, per
mode: wall time, samples/s, the trainer's idle share (synchronous: the rollout phase of each step;
asynchronous: blocked on an empty queue), the staleness histogram, the curve; and the wall time each took to
reach the same held-out F1 (``--target-f1``, default the lower of the two runs' best).

A ratio of two runs made at different loads measures the load, so the two trainers alternate in one invocation
(sync, async, sync, async, ...), one pair per ``--seeds`` entry (the training and delay seed), with the machine's
calibration (``quickstart.calibration``) measured right before each run. Each pair's ratios are reported, and their
median with the lowest and highest beside it (``speedup_to_target``, ``speedup_samples_per_s``).

    deepresearcher bench train --slow-tools --model runs/quickstart/sft_model --steps 8 --prompts 8 --group 8 \
        --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def _config(work: Path, args: argparse.Namespace) -> Any:
    from deepresearcher.config import load_config

    return load_config(None, [
        f"cache_dir={work / 'cache'}", f"world.size={args.size}", "search.top_k=3", "search.snippet_chars=80",
        "search.max_queries=1", "browse.max_urls=1", "browse.top_passages=1", f"agent.max_turns={args.turns}",
        f"agent.max_tokens_per_turn={args.tokens_per_turn}", "agent.context_budget=2048",
        f"train.runs_dir={work / 'runs'}", "train.run_name=bench", f"train.group_size={args.group}",
        f"train.prompts_per_step={args.prompts}", f"train.micro_batch_size={args.micro_batch}",
        f"train.max_steps={args.steps}", "train.save_every=1000", "train.sample_trajectories=0",
        "train.compact_prompt=true", "train.learning_rate=1e-4",
    ])


def _raw_step(model: Any, ref: Any, trajectories: list[Any], micro: int, pad_id: int) -> tuple[float, int]:
    """Reference forward plus micro-batched forward/backward with ``grpo_loss``; returns (seconds, tokens).
    Batches are built on the model's device."""
    import torch

    from deepresearcher.train.loss import grpo_loss

    start, tokens = time.perf_counter(), 0
    device = model.device
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    for i in range(0, len(trajectories), micro):
        batch = trajectories[i : i + micro]
        width = max(len(t.all_ids) for t in batch)
        ids = torch.full((len(batch), width), pad_id, device=device)
        mask = torch.zeros((len(batch), width), device=device)
        attention = torch.zeros((len(batch), width), dtype=torch.long, device=device)
        for row, t in enumerate(batch):
            n, p = len(t.all_ids), len(t.prompt_ids)
            ids[row, :n] = torch.tensor(t.all_ids, device=device)
            attention[row, :n] = 1
            mask[row, p:n] = torch.tensor(t.completion_mask, dtype=torch.float, device=device)
        tokens += int(attention.sum())
        with torch.no_grad():
            ref_lp = torch.log_softmax(ref(input_ids=ids, attention_mask=attention).logits[:, :-1], -1)
            ref_lp = ref_lp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
        logp_all = torch.log_softmax(logits, -1)
        logps = logp_all.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        entropies = -(logp_all.exp() * logp_all).sum(-1)
        parts = grpo_loss(logps, logps.detach(), torch.randn(len(batch), device=device), mask[:, 1:],
                          ref_logps=ref_lp, kl_coef=0.001, entropies=entropies, entropy_coef=0.001)
        parts.loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return time.perf_counter() - start, tokens


def run(prompts: int = 4, group: int = 16, steps: int = 2, size: str = "tiny", turns: int = 6,
        tokens_per_turn: int = 64, micro_batch: int = 32) -> dict[str, Any]:
    import torch
    from transformers import AutoTokenizer

    from deepresearcher.inference.loader import load_trainable
    from deepresearcher.quickstart.recipe import tokenizer_corpus
    from deepresearcher.quickstart.tiny_model import build_tiny_checkpoint
    from deepresearcher.train.pipeline import run_grpo
    from deepresearcher.train.rollout import Rollouts, task_dict
    from deepresearcher.train.run_dir import read_metrics
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    args = argparse.Namespace(prompts=prompts, group=group, steps=steps, size=size, turns=turns,
                              tokens_per_turn=tokens_per_turn, micro_batch=micro_batch)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = _config(work, args)
        world = ensure_world(config)
        tasks = [task_dict(t) for t in load_tasks(world, "train")]
        rollouts = Rollouts(config)
        try:
            episodes = rollouts.oracle_episodes(tasks[:200])
            model_dir = build_tiny_checkpoint(tokenizer_corpus(world, tasks[:200], episodes), work / "model",
                                              config.train.tiny_model)
            tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
            model = load_trainable(model_dir)
            ref = load_trainable(model_dir).eval()  # float32, as TRL's reference model
            batch = [t for t in tasks[:prompts] for _ in range(group)]
            start = time.perf_counter()
            with torch.no_grad():
                trajectories = rollouts.collect(batch, model.eval(), tokenizer)
            rollout_s = time.perf_counter() - start
            model.train()
            train_s, train_tokens = _raw_step(model, ref, trajectories, micro_batch, tokenizer.pad_token_id)
            result = run_grpo(config, model=model_dir, rollouts=rollouts, tasks=tasks, show_progress=False)
        finally:
            rollouts.close()
        metrics = read_metrics(result.run_dir / "metrics.jsonl")
    total = sum(len(t.completion_ids) for t in trajectories)
    sampled = sum(sum(t.completion_mask) for t in trajectories)
    trl_step = statistics.median(m["step_seconds"] for m in metrics)
    raw_step = rollout_s + train_s
    return {
        "rollouts_per_step": prompts * group,
        "params": sum(p.numel() for p in model.parameters()),
        "tokens_per_episode": sum(len(t.all_ids) for t in trajectories) / len(trajectories),
        "rollout_tokens_per_s": round(total / rollout_s, 1),
        "policy_tokens_per_s": round(sampled / rollout_s, 1),
        "train_tokens_per_s": round(train_tokens / train_s, 1),
        "rollout_s": round(rollout_s, 2),
        "raw_train_s": round(train_s, 2),
        "raw_s_per_step": round(raw_step, 2),
        "trl_s_per_step": round(trl_step, 2),
        "trl_rollout_s_per_step": round(statistics.median(m["rollout_seconds"] for m in metrics), 2),
        "trl_overhead": round(trl_step / raw_step - 1, 3),
        "threads": torch.get_num_threads(),
    }


def _curve(run_dir: Path, metrics: list[dict[str, Any]], rollouts_per_step: int, evaluate_at: Any) -> list[dict[str, Any]]:
    """Held-out F1 of each checkpoint of ``run_dir`` against the training wall time at which it was taken."""
    elapsed = {m["step"]: m["elapsed_seconds"] for m in metrics}
    points = []
    for checkpoint in sorted((run_dir / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1])):
        step = int(checkpoint.name.split("-")[1])
        f1, se = evaluate_at(checkpoint)
        points.append({"step": step, "samples": step * rollouts_per_step, "elapsed_s": round(elapsed[step], 1),
                       "heldout_f1": round(f1, 4), "heldout_f1_se": round(se, 4)})
    return points


def _mode_summary(mode: str, metrics: list[dict[str, Any]], rollouts_per_step: int) -> dict[str, Any]:
    wall = metrics[-1]["elapsed_seconds"]
    waited = sum(m.get("rollout_wait_seconds" if mode == "async" else "rollout_seconds", 0.0) for m in metrics)
    histogram: dict[str, int] = {}
    for m in metrics:
        for k, n in m.get("staleness_histogram", {}).items():
            histogram[k] = histogram.get(k, 0) + n
    return {
        "wall_s": round(wall, 1),
        "samples": len(metrics) * rollouts_per_step,
        "samples_per_s": round(len(metrics) * rollouts_per_step / wall, 3),
        "trainer_idle_share": round(waited / wall, 3),
        "staleness_histogram": histogram if mode == "async" else {"0": len(metrics) * rollouts_per_step},
        "dropped_stale": int(sum(m.get("dropped_stale", 0) for m in metrics)),
        "tool_calls": round(statistics.mean(m["tool_calls"] for m in metrics), 2),
        "sampled_f1": [[round(m["elapsed_seconds"], 1), round(m["f1"], 3)] for m in metrics],
    }


def time_to_target(curves: dict[str, list[dict[str, Any]]], target: float | None) -> tuple[float, dict[str, float | None]]:
    """The held-out F1 to reach (``target``, else the lower of the runs' best, which every run reaches) and the
    training wall time at which each run's first checkpoint reached it (None: never)."""
    if target is None:
        target = min(max(p["heldout_f1"] for p in curve) for curve in curves.values())
    return target, {mode: next((p["elapsed_s"] for p in curve if p["heldout_f1"] >= target), None)
                    for mode, curve in curves.items()}


def spread(values: list[float | None]) -> dict[str, Any]:
    """The median of the pairs' ratios with the lowest and highest beside it (pairs without a ratio left out)."""
    known = [v for v in values if v is not None]
    if not known:
        return {"median": None, "min": None, "max": None, "pairs": values}
    return {"median": round(statistics.median(known), 2), "min": min(known), "max": max(known), "pairs": values}


def pair_summary(seed: int, runs: dict[str, dict[str, Any]], target_f1: float | None) -> dict[str, Any]:
    """One seed's synchronous and asynchronous runs side by side: the F1 both reached and how soon each did."""
    target, reach = time_to_target({mode: run["heldout_curve"] for mode, run in runs.items()}, target_f1)
    pair: dict[str, Any] = {"seed": seed, **runs, "target_heldout_f1": round(target, 4), "wall_s_to_target": reach,
                            "speedup_to_target": None, "speedup_samples_per_s": None}
    if reach.get("sync") and reach.get("async"):
        pair["speedup_to_target"] = round(reach["sync"] / reach["async"], 2)
    if "sync" in runs and "async" in runs:
        pair["speedup_samples_per_s"] = round(runs["async"]["samples_per_s"] / runs["sync"]["samples_per_s"], 2)
    return pair


def slow_tools(model: str, config_path: str | None, steps: int, prompts: int, group: int, micro_batch: int,
               median_s: float, p99_s: float, max_staleness: int, eval_every: int, eval_tasks: int,
               target_f1: float | None, modes: list[str], overrides: list[str] | None = None,
               seeds: list[int] | None = None) -> dict[str, Any]:
    """Synchronous vs asynchronous GRPO with slow tools, alternated over ``seeds`` (module docstring)."""
    import torch

    from deepresearcher.config import load_config
    from deepresearcher.inference.loader import resolve_checkpoint
    from deepresearcher.quickstart.calibration import measure_machine
    from deepresearcher.train.heldout import evaluate
    from deepresearcher.train.pipeline import run_grpo
    from deepresearcher.train.rollout import Rollouts
    from deepresearcher.train.run_dir import read_metrics
    from deepresearcher.train.tasks import task_sets

    seeds = seeds or [0]
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    out: dict[str, Any] = {"rollouts_per_step": prompts * group, "steps": steps, "threads": torch.get_num_threads(),
                           "latency": {"distribution": "lognormal", "median_s": median_s, "p99_s": p99_s},
                           "max_staleness": max_staleness, "seeds": seeds, "order": [], "pairs": []}
    with tempfile.TemporaryDirectory() as tmp:
        shared = [f"train.runs_dir={tmp}", f"train.max_steps={steps}", f"train.prompts_per_step={prompts}",
                  f"train.group_size={group}", f"train.micro_batch_size={micro_batch}", f"train.save_every={eval_every}",
                  "train.keep_checkpoints=1000", "train.sample_trajectories=0", f"train.eval_tasks={eval_tasks}",
                  f"train.async_grpo.max_staleness={max_staleness}", *(overrides or [])]
        fast = load_config(config_path, shared)
        model = str(resolve_checkpoint(model, fast.resolved_cache_dir()))
        sets = task_sets(fast)
        evaluator = Rollouts(fast, seed=fast.train.seed, world_dirs=sets.environments)
        try:
            def heldout_f1(checkpoint: Path) -> tuple[float, float]:
                summary = evaluate(checkpoint, sets.test, evaluator, fast).by_type()["all"]
                return summary["f1"], summary["f1_se"]

            out["start_heldout_f1"] = round(heldout_f1(Path(model))[0], 4)
            for seed in seeds:
                runs: dict[str, dict[str, Any]] = {}
                for mode in modes:  # sync, async, sync, async, ...: both trainers see the same hours of the machine
                    config = load_config(config_path, [
                        *shared, f"train.run_name={mode}-seed{seed}", f"train.seed={seed}",
                        f"train.async_grpo.enabled={mode == 'async'}", "env.latency.distribution=lognormal",
                        f"env.latency.median_s={median_s}", f"env.latency.p99_s={p99_s}", f"env.latency.seed={seed}"])
                    calibration = measure_machine().sft_tokens_per_second
                    result = run_grpo(config, model=model, tasks=sets.grpo, show_progress=False)
                    metrics = read_metrics(result.run_dir / "metrics.jsonl")
                    run = _mode_summary(mode, metrics, prompts * group)
                    run["calibration_sft_tokens_per_s"] = calibration
                    run["heldout_curve"] = _curve(result.run_dir, metrics, prompts * group, heldout_f1)
                    run["final_heldout_f1"] = run["heldout_curve"][-1]["heldout_f1"]
                    runs[mode] = run
                    out["order"].append(f"{mode}:{seed}")
                out["pairs"].append(pair_summary(seed, runs, target_f1))
        finally:
            evaluator.close()
    out["speedup_to_target"] = spread([pair["speedup_to_target"] for pair in out["pairs"]])
    out["speedup_samples_per_s"] = spread([pair["speedup_samples_per_s"] for pair in out["pairs"]])
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="deepresearcher bench train", description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group", type=int, default=16)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--tokens-per-turn", type=int, default=64)
    parser.add_argument("--micro-batch", type=int, default=32)
    parser.add_argument("--slow-tools", action="store_true", help="synchronous vs asynchronous GRPO with slow tools")
    parser.add_argument("--model", help="--slow-tools: the warm start (e.g. runs/quickstart/sft_model)")
    parser.add_argument("--config", help="--slow-tools: the config (default: configs/quickstart.yaml's settings)")
    parser.add_argument("--median-s", type=float, default=1.0, help="--slow-tools: median delay of a tool call")
    parser.add_argument("--p99-s", type=float, default=15.0, help="--slow-tools: 99th-percentile delay")
    parser.add_argument("--max-staleness", type=int, default=1)
    parser.add_argument("--eval-every", type=int, default=2, help="--slow-tools: checkpoint and evaluate every N steps")
    parser.add_argument("--eval-tasks", type=int, default=200)
    parser.add_argument("--target-f1", type=float, default=None)
    parser.add_argument("--modes", default="sync,async")
    parser.add_argument("--seeds", default="0,1,2",
                        help="--slow-tools: one alternated pair of runs per seed (training and delay seed)")
    parser.add_argument("--set", action="append", default=[], dest="overrides",
                        help="--slow-tools: a config override for both runs (repeatable), e.g. train.use_vllm=true")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry; output is always JSON")
    a = parser.parse_args(argv or [])
    if a.slow_tools:
        if not a.model:
            raise SystemExit("--slow-tools needs --model: a warm start that calls tools (deepresearcher quickstart "
                             "writes runs/quickstart/sft_model); a random model never calls one.")
        return slow_tools(a.model, a.config or "quickstart", a.steps, a.prompts, a.group, a.micro_batch,
                          a.median_s, a.p99_s, a.max_staleness, a.eval_every, a.eval_tasks, a.target_f1,
                          a.modes.split(","), a.overrides, [int(x) for x in a.seeds.split(",")])
    return run(a.prompts, a.group, a.steps, a.size, a.turns, a.tokens_per_turn, a.micro_batch)


if __name__ == "__main__":
    print(json.dumps(main(__import__("sys").argv[1:]), indent=2))
