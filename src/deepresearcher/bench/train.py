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
    """Reference forward plus micro-batched forward/backward with ``grpo_loss``; returns (seconds, tokens)."""
    import torch

    from deepresearcher.train.loss import grpo_loss

    start, tokens = time.perf_counter(), 0
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    for i in range(0, len(trajectories), micro):
        batch = trajectories[i : i + micro]
        width = max(len(t.all_ids) for t in batch)
        ids = torch.full((len(batch), width), pad_id)
        mask = torch.zeros((len(batch), width))
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, t in enumerate(batch):
            n, p = len(t.all_ids), len(t.prompt_ids)
            ids[row, :n] = torch.tensor(t.all_ids)
            attention[row, :n] = 1
            mask[row, p:n] = torch.tensor(t.completion_mask, dtype=torch.float)
        tokens += int(attention.sum())
        with torch.no_grad():
            ref_lp = torch.log_softmax(ref(input_ids=ids, attention_mask=attention).logits[:, :-1], -1)
            ref_lp = ref_lp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
        logp_all = torch.log_softmax(logits, -1)
        logps = logp_all.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        entropies = -(logp_all.exp() * logp_all).sum(-1)
        parts = grpo_loss(logps, logps.detach(), torch.randn(len(batch)), mask[:, 1:], ref_logps=ref_lp,
                          kl_coef=0.001, entropies=entropies, entropy_coef=0.001)
        parts.loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return time.perf_counter() - start, tokens


def run(prompts: int = 4, group: int = 16, steps: int = 2, size: str = "tiny", turns: int = 6,
        tokens_per_turn: int = 64, micro_batch: int = 32) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from deepresearcher.train.pipeline import run_grpo
    from deepresearcher.train.quickstart import tokenizer_corpus
    from deepresearcher.train.rollout import Rollouts, task_dict
    from deepresearcher.train.run_dir import read_metrics
    from deepresearcher.train.tiny_model import build_tiny_checkpoint
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
            model = AutoModelForCausalLM.from_pretrained(str(model_dir))
            ref = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="deepresearcher bench train", description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group", type=int, default=16)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--tokens-per-turn", type=int, default=64)
    parser.add_argument("--micro-batch", type=int, default=32)
    parser.add_argument("--json", action="store_true", help="accepted for symmetry; output is always JSON")
    a = parser.parse_args(argv or [])
    return run(a.prompts, a.group, a.steps, a.size, a.turns, a.tokens_per_turn, a.micro_batch)


if __name__ == "__main__":
    print(json.dumps(main(__import__("sys").argv[1:]), indent=2))
