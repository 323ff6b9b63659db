"""The training parts of ``bench gpu``: the paper recipe's GRPO (in process and through vLLM), SFT, asynchronous
GRPO and verl, each run through the function its command runs, on the prepared checkpoint.

Every part starts from ``configs/paper-qwen2.5-7b.yaml`` made offline as ``tests/train/test_paper_recipe.py``
makes it (the rest is the recipe's): the default synthetic world instead of the paper's data and Serper
(``search.backend=local`` with no index, ``train.data=[{kind: world}]``), the extractive reader instead of
the paper's reading agent on qwen-plus, no held-out evaluation, and a small batch and short turns. On the
CPU (``--tiny``) also fp32 without activation checkpointing, as that test runs it, and micro-batches of 2 (a
micro-batch's logits over the 152k-word vocabulary take gigabytes there).
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import time
from pathlib import Path
from typing import Any

from deepresearcher.bench._gpu_common import PartContext, Skip


def offline_overrides(ctx: PartContext, run_name: str) -> list[str]:
    """The recipe made offline and small (module docstring), with its run directory and caches in the work folder."""
    from transformers import AutoConfig

    from deepresearcher.inference import device

    o = ctx.options
    rollouts = o["prompts"] * o["group"]
    max_positions = AutoConfig.from_pretrained(str(ctx.model_dir)).max_position_embeddings
    overrides = [
        f"cache_dir={ctx.work / 'cache'}", f"train.runs_dir={ctx.work / 'runs'}", f"train.run_name={run_name}",
        f"train.model={ctx.model_dir}", f"runtime.device={o['device']}",
        "search.backend=local", "browse.reader=extractive", "train.data=[{kind: world}]",
        "train.eval_data=null", "train.eval_every=0",
        f"train.prompts_per_step={o['prompts']}", f"train.group_size={o['group']}",
        f"train.micro_batch_size={min(rollouts, 2 if ctx.tiny else 8)}", f"train.max_steps={o['steps']}",
        "train.save_every=100000", f"train.sample_trajectories={rollouts}", "train.use_vllm=false",
        f"agent.max_turns={o['turns']}", f"agent.max_tokens_per_turn={o['tokens_per_turn']}",
        f"agent.context_budget={min(32768, max_positions)}",
    ]
    if not device.on_gpu():
        overrides += ["train.bf16=false", "train.gradient_checkpointing=false"]
    return overrides


def _paper_config(ctx: PartContext, run_name: str, *extra: str) -> Any:
    from deepresearcher.config import load_config

    return load_config("paper-qwen2.5-7b", [*offline_overrides(ctx, run_name), *extra])


def _recipe_settings(config: Any) -> dict[str, Any]:
    train = config.train
    return {"rollouts_per_step": train.prompts_per_step * train.group_size, "micro_batch": train.micro_batch_size,
            "max_turns": config.agent.max_turns, "max_tokens_per_turn": config.agent.max_tokens_per_turn,
            "bf16": train.bf16, "gradient_checkpointing": train.gradient_checkpointing}


def _trained_tokens(run_dir: Path, step: int) -> int:
    """Tokens of the step's episodes (prompt, sampled and observation tokens: what the update forwards)."""
    lines = (run_dir / "samples" / f"step_{step:05d}.jsonl").read_text(encoding="utf-8").splitlines()
    return sum(len(segment["token_ids"]) for line in lines if line.strip()
               for segment in json.loads(line)["segments"])


def _run_grpo(ctx: PartContext, config: Any) -> dict[str, Any]:
    """``run_grpo`` as ``deepresearcher train`` calls it; the figures of its metrics.jsonl, headline from the last
    step (the first includes warm-up and compilation)."""
    from deepresearcher.train.pipeline import run_grpo
    from deepresearcher.train.run_dir import read_metrics

    result = run_grpo(config, show_progress=False)
    steps = []
    for m in read_metrics(result.run_dir / "metrics.jsonl"):
        rollout_s, step_s = m["rollout_seconds"], m["step_seconds"]
        steps.append({"step": m["step"], "s": round(step_s, 3), "rollout_s": round(rollout_s, 3),
                      "update_s": round(step_s - rollout_s, 3),
                      "policy_tokens_per_s": round(m["response_tokens"] * m["rollouts"] / rollout_s, 1),
                      "trained_tokens": _trained_tokens(result.run_dir, m["step"]), "reward": m.get("reward")})
    if not steps:
        raise RuntimeError(f"run_grpo wrote no metrics line to {result.run_dir / 'metrics.jsonl'}")
    last = steps[-1]
    return {"steps": len(steps), "s_per_step": last["s"], "rollout_s": last["rollout_s"], "update_s": last["update_s"],
            "policy_tokens_per_s": last["policy_tokens_per_s"],
            **ctx.update_figures(last["trained_tokens"], last["update_s"]),
            "settings": _recipe_settings(config), "per_step": steps}


def grpo_paper(ctx: PartContext) -> dict[str, Any]:
    """The paper recipe for ``--steps`` GRPO steps, sampling with the local engine in the trainer's process."""
    return _run_grpo(ctx, _paper_config(ctx, "grpo-paper"))


def grpo_paper_vllm(ctx: PartContext) -> dict[str, Any]:
    """The same steps sampling through TRL's colocated vLLM engine (``train.use_vllm=true``)."""
    from deepresearcher.inference import device

    if importlib.util.find_spec("vllm") is None:
        raise Skip("vLLM is not installed")
    if not device.on_gpu():
        raise Skip("vLLM generation needs a CUDA GPU")
    return _run_grpo(ctx, _paper_config(ctx, "grpo-paper-vllm", "train.use_vllm=true"))


def sft(ctx: PartContext) -> dict[str, Any]:
    """``train_sft`` (as ``deepresearcher sft`` runs it) for ``--sft-steps`` on the scripted oracle's episodes of the
    world's SFT tasks in the recipe's template. Steady figures: the mean tokens of a step over the median time of
    the steps after the first."""
    from transformers import AutoTokenizer

    from deepresearcher.train.rollout import Rollouts
    from deepresearcher.train.tasks import task_sets
    from deepresearcher.warmstart.pipeline import sft_demonstrations
    from deepresearcher.warmstart.sft import train_sft

    o = ctx.options
    # --tiny cuts episodes at 768 tokens: the CPU's logits over 152k words would otherwise take gigabytes a batch.
    config = _paper_config(ctx, "sft", f"train.sft.steps={o['sft_steps']}", f"train.sft.batch_size={o['sft_batch']}",
                           "train.sft.check_drills=0", "train.sft.warmup_steps=0",
                           *(["train.sft.max_seq_len=768"] if ctx.tiny else []))
    tokenizer = AutoTokenizer.from_pretrained(str(ctx.model_dir))
    sets = task_sets(config)
    rollouts = Rollouts(config, seed=0, world_dirs=sets.environments)
    try:
        episodes = sft_demonstrations(config, rollouts, sets.sft[: 4 * o["sft_batch"]], tokenizer)
    finally:
        rollouts.close()
    marks: list[float] = []
    result = train_sft(ctx.model_dir, episodes, config.train.sft, ctx.work / "sft-model", bf16=config.train.bf16,
                       on_step=lambda step, loss: marks.append(time.perf_counter()))
    tokens_per_step = result.tokens_per_second * result.seconds / result.steps
    gaps = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    steady = statistics.median(gaps) if gaps else result.seconds
    return {"steps": result.steps, "s_per_step": round(steady, 3), "tokens_per_s": round(tokens_per_step / steady, 1),
            "tokens_per_s_all_steps": round(result.tokens_per_second, 1), "final_loss": round(result.final_loss, 4),
            "episodes": len(episodes), "mean_episode_tokens": round(statistics.mean(len(e.all_ids) for e in episodes)),
            **ctx.update_figures(tokens_per_step, steady), "bf16": config.train.bf16}


def _tree_attention_in_use(bf16: bool) -> dict[str, str | None]:
    """The tree attention the step trained with, and why (``train.tree_attention``'s choice); before that module,
    the function registered under TRL's attention name."""
    try:
        from deepresearcher.train.tree_attention import choose_tree_attention, installed_tree_attention
    except ImportError:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        from trl.experimental.async_grpo.packing import TREE_ATTENTION

        function = ALL_ATTENTION_FUNCTIONS.get(TREE_ATTENTION)
        return {"name": f"{function.__module__}.{function.__qualname__}" if function else None, "reason": None}
    from deepresearcher.inference import device

    return {"name": installed_tree_attention(),
            "reason": choose_tree_attention(on_gpu=device.on_gpu(), half_precision=bf16).reason}


def async_grpo(ctx: PartContext) -> dict[str, Any]:
    """One step of asynchronous GRPO (``train.async_grpo.enabled``) through ``run_grpo``, and its tree attention.

    In the native protocol: the asynchronous trainer needs every trained token's sampling log-probability, which
    the paper's protocol (its context re-rendered each turn) does not keep."""
    from transformers import Trainer

    from deepresearcher.train.pipeline import run_grpo
    from deepresearcher.train.run_dir import read_metrics

    config = _paper_config(ctx, "async-grpo", "train.async_grpo.enabled=true", "train.max_steps=1",
                           "agent.protocol=native")
    logged: list[dict[str, Any]] = []
    original = Trainer.log

    def log(self: Any, logs: dict[str, Any], *args: Any, **kwargs: Any) -> None:  # TRL's perf/* figures, as logged
        logged.append(dict(logs))
        original(self, logs, *args, **kwargs)

    Trainer.log = log  # type: ignore[method-assign]
    try:
        result = run_grpo(config, show_progress=False)
    finally:
        Trainer.log = original  # type: ignore[method-assign]
    (m,) = read_metrics(result.run_dir / "metrics.jsonl")
    trl = next((entry for entry in logged if "loss" in entry), {})
    update_s = trl.get("perf/fwd_bwd_s")
    if not update_s:
        raise RuntimeError(f"TRL logged no perf/fwd_bwd_s for the step; its logs: {sorted(trl)}")
    # Forwarded tokens: the packed trie's, where a group's shared prompt is forwarded once.
    forwarded = trl["perf/forwarded_tok_s_fwd_bwd"] * update_s
    return {"steps": 1, "s_per_step": round(m["step_seconds"], 3),
            "rollout_wait_s": round(m.get("rollout_wait_seconds", 0.0), 3), "update_s": round(update_s, 3),
            "tree_attention": _tree_attention_in_use(config.train.bf16), **ctx.update_figures(forwarded, update_s),
            "trl_mfu": trl.get("perf/mfu_fwd_bwd"),
            "trl_perf": {k: v for k, v in trl.items() if k.startswith(("perf/", "sample/"))},
            "settings": _recipe_settings(config)}


def verl(ctx: PartContext) -> dict[str, Any]:
    """One step of ``train --engine verl`` (``configs/paper-qwen2.5-7b-verl.yaml`` made offline, one GPU), as
    ``bench/gpu_check_verl.sh`` runs it; figures from verl's own metrics.jsonl."""
    from deepresearcher.inference import device

    if importlib.util.find_spec("verl") is None:
        raise Skip("verl is not installed (pip install -e '.[verl]')")
    if not device.on_gpu():
        raise Skip("verl runs its actor and rollout workers on CUDA GPUs through Ray; on the CPU the project runs it "
                   "only with the test stand-ins of tests/integrations, which replace the model, so there is "
                   "nothing to time here")
    if importlib.util.find_spec("vllm") is None:
        raise Skip("verl's rollout servers need vLLM, which is not installed (pip install 'verl[vllm]')")
    from deepresearcher.config import load_config
    from deepresearcher.integrations.verl import launch

    o = ctx.options
    config = load_config("paper-qwen2.5-7b-verl", [
        *offline_overrides(ctx, "verl"), "train.max_steps=1", "train.verl.gpus_per_node=1",
        "train.verl.tensor_parallel_size=1", "train.verl.sequence_parallel_size=1",
        "train.verl.gpu_memory_utilization=0.4", "train.verl.agent_workers=2", "train.verl.max_prompt_length=1024",
        f"train.micro_batch_size={min(8, o['prompts'] * o['group'])}", "train.verl.overrides=[trainer.save_freq=-1]",
    ])
    prepared = launch.prepare(config, str(ctx.model_dir))
    launch.run(prepared)
    lines = prepared.files.metrics_jsonl.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line)["data"] for line in lines if line.strip()]
    if not rows:
        raise RuntimeError(f"verl wrote no step to {prepared.files.metrics_jsonl}")
    last = rows[-1]
    step_s = last["timing_s/step"]
    update_s, tokens = last.get("timing_s/update_actor"), last["perf/total_num_tokens"]
    return {"steps": len(rows), "s_per_step": round(step_s, 3), "rollout_s": last.get("timing_s/gen"),
            "update_s": update_s, "tokens_per_s": round(tokens / step_s, 1),
            **(ctx.update_figures(tokens, update_s) if update_s else {}), "verl_mfu": last.get("perf/mfu/actor"),
            "verl_metrics": {k: v for k, v in last.items() if k.startswith(("perf/", "timing_s/"))}}
