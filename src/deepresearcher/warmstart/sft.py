"""SFT warm start: teach a model the research format from the scripted oracle's trajectories.

A model with random weights cannot find the tool format by RL alone, so it first imitates the oracle.
The data are ordinary ``Trajectory`` objects from the same rollout engine and chat template the RL
run uses (token-in/token-out), so SFT and RL see byte-identical turn boundaries.

Loss per token (next-token cross-entropy), normalized by the total weight of the batch::

    prompt tokens        weight 0
    policy tokens        weight 1                     (what the agent must write)
    observation tokens   weight ``obs_loss_weight``   (tool output; SFT only, RL keeps them masked)

The observation term is why a ~1M-parameter model learns to *copy* names out of search results in
budget: with policy tokens alone it never did (prototype finding). TRL's ``SFTTrainer`` has only 0/1
completion masks, not per-token weights, so this is a plain PyTorch loop.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import SFTConfig
from deepresearcher.errors import ConfigError
from deepresearcher.train.output_layer import next_token_logits
from deepresearcher.train.threads import ThreadChooser
from deepresearcher.warmstart.drills import Row, pack

logger = logging.getLogger(__name__)


def token_weights(trajectory: Trajectory, obs_loss_weight: float) -> list[float]:
    """Loss weight of each token of ``trajectory.all_ids`` (see the module docstring)."""
    weight = {"prompt": 0.0, "policy": 1.0, "env": obs_loss_weight}
    return [weight[s.source] for s in trajectory.segments for _ in s.token_ids]


def sft_loss(logits: Any, targets: Any, weights: Any) -> Any:
    """Weighted cross-entropy of ``logits`` (``[n, vocab]``) against ``targets`` (``[n]``), normalized by the total weight."""
    import torch.nn.functional as F

    ce = F.cross_entropy(logits.float(), targets, reduction="none")
    return (ce * weights).sum() / weights.sum().clamp(min=1e-8)


def next_token_loss(model: Any, input_ids: Any, attention_mask: Any, weights: Any) -> Any:
    """The SFT loss of a batch: token ``t+1`` is predicted from position ``t`` and weighted by ``weights[t+1]``;
    only positions whose next token carries weight go through the output layer."""
    where = weights[:, 1:] > 0
    logits = next_token_logits(model, input_ids, attention_mask, where)
    return sft_loss(logits, input_ids[:, 1:][where], weights[:, 1:][where])


def collate(trajectories: list[Trajectory], obs_loss_weight: float, max_len: int, pad_id: int,
            drills: Iterator[Row] | None = None, drill_count: int = 0, *, device: Any) -> tuple[Any, Any, Any]:
    """Right-padded ``input_ids``, ``attention_mask`` and loss ``weights`` tensors on ``device`` (the model's),
    cut to ``max_len``; with ``drills``, the next ``drill_count`` of them packed into extra rows no wider than
    the episodes'."""
    rows = [(t.all_ids[:max_len], token_weights(t, obs_loss_weight)[:max_len]) for t in trajectories]
    if drills is not None and drill_count:
        rows += pack([next(drills) for _ in range(drill_count)], max(len(ids) for ids, _ in rows))
    return pad_rows(rows, pad_id, device=device)


def pad_rows(rows: list[Row], pad_id: int, *, device: Any) -> tuple[Any, Any, Any]:
    """Token rows and their loss weights as right-padded ``input_ids``, ``attention_mask`` and ``weights`` on
    ``device``: the model's, which a caller must name (each tensor is copied there once, whole)."""
    import torch

    width = max(len(ids) for ids, _ in rows)
    padding = [width - len(row_ids) for row_ids, _ in rows]
    ids = [row_ids + [pad_id] * pad for (row_ids, _), pad in zip(rows, padding, strict=True)]
    mask = [[1] * len(row_ids) + [0] * pad for (row_ids, _), pad in zip(rows, padding, strict=True)]
    weights = [row_w + [0.0] * (width - len(row_w)) for _, row_w in rows]
    return (torch.tensor(ids, dtype=torch.long, device=device), torch.tensor(mask, dtype=torch.long, device=device),
            torch.tensor(weights, dtype=torch.float32, device=device))


def length_bucketed_batches(lengths: list[int], batch_size: int, seed: int, pool: int = 8) -> Iterator[list[int]]:
    """Endless batches of indices: each pass is shuffled, cut into pools of ``pool`` batches, and each pool is
    sorted by length before it is split, so a batch holds similar lengths and pads little (episodes range
    from one hop to three, so random batches waste about half their compute on padding)."""
    rng = random.Random(seed)
    size = min(batch_size, len(lengths))
    while True:
        order = list(range(len(lengths)))
        rng.shuffle(order)
        for p in range(0, len(order) - size + 1, size * pool):
            chunk = sorted(order[p : p + size * pool], key=lengths.__getitem__)
            batches = [chunk[i : i + size] for i in range(0, len(chunk) - size + 1, size)]
            rng.shuffle(batches)
            yield from batches


def sft_optimizers(model: Any, cfg: SFTConfig) -> list[Any]:
    """The SFT optimizers: AdamW on every parameter, or (``cfg.optimizer == "muon"``) Muon on the hidden
    layers' weight matrices and AdamW on the rest (embeddings, output layer, norms, biases), as Muon's
    authors prescribe: Muon takes only matrices, so it needs a second optimizer beside it."""
    import torch

    from deepresearcher.warmstart.muon import Muon

    if cfg.optimizer == "adamw":
        return [torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=0.0)]
    embeddings = {id(model.get_input_embeddings().weight), id(model.get_output_embeddings().weight)}
    hidden: list[Any] = []
    rest: list[Any] = []
    for param in model.parameters():
        (hidden if param.ndim == 2 and id(param) not in embeddings else rest).append(param)
    return [Muon(hidden, lr=cfg.muon_learning_rate), torch.optim.AdamW(rest, lr=cfg.learning_rate, weight_decay=0.0)]


@dataclass
class SFTResult:
    """What an SFT run did."""

    model_dir: Path
    steps: int
    final_loss: float
    seconds: float
    tokens_per_second: float
    threads_kept: int = 0
    """Torch threads at the end of SFT (``adapt_threads``: the count the steps ran fastest on)."""
    thread_switches: int = 0


def train_sft(
    model_path: str | Path,
    trajectories: list[Trajectory],
    cfg: SFTConfig,
    out_dir: Path,
    *,
    bf16: bool = False,
    on_step: Callable[[int, float], None] | None = None,
    drills: list[Row] | None = None,
    adapt_threads: bool = False,
) -> SFTResult:
    """Fine-tune ``model_path`` on ``trajectories`` and save model and tokenizer to ``out_dir``.

    ``drills`` (``warmstart.drills.drill_rows``): ``cfg.check_drills`` of them packed beside every batch, in order
    and round again when they run out.

    AdamW with linear warmup then cosine decay; batches are drawn without replacement, reshuffled
    each pass, from a generator seeded with ``cfg.seed``. ``bf16``: the forward pass under bfloat16
    autocast (weights, gradients and optimizer state stay fp32), on the CPU as on a GPU. The model trains on
    the process's device (``runtime.device``, see ``inference.loader.load_trainable``) and each batch goes there.
    ``adapt_threads`` (``train.adapt_threads``): on the CPU, torch's thread count is chosen by the steps' own speed
    (``train.threads.ThreadChooser``: one thread where another job shares the cores) and restored afterwards.
    """
    import torch
    from transformers import AutoTokenizer

    from deepresearcher.inference.loader import load_trainable

    if not trajectories:
        raise ValueError("SFT needs at least one trajectory")
    if cfg.steps < 1:
        raise ConfigError("train.sft.steps is 0: set it to the number of SFT optimizer steps (configs/quickstart.yaml uses 900).")
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    model = load_trainable(model_path)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    optimizers = sft_optimizers(model, cfg)

    def lr_at(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))

    schedulers = [torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at) for optimizer in optimizers]
    batches = length_bucketed_batches([len(t.all_ids) for t in trajectories], cfg.batch_size, cfg.seed,
                                      pool=cfg.length_pool)
    drill_stream = itertools.cycle(drills) if drills else None
    default_threads = torch.get_num_threads()
    chooser = ThreadChooser() if adapt_threads and model.device.type == "cpu" else None
    start, tokens, loss_value = time.perf_counter(), 0, float("nan")
    for step in range(cfg.steps):
        if chooser is not None:
            chooser.before_step()
        batch = [trajectories[i] for i in next(batches)]
        ids, mask, weights = collate(batch, cfg.obs_loss_weight, cfg.max_seq_len, pad_id, drill_stream,
                                     cfg.check_drills, device=model.device)
        with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = next_token_loss(model, ids, mask, weights)
        model.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        for optimizer, scheduler in zip(optimizers, schedulers, strict=True):
            optimizer.step()
            scheduler.step()
        tokens += int(mask.sum())
        loss_value = float(loss.detach())
        if chooser is not None:
            chooser.after_step(int(mask.sum()))
        if on_step is not None:
            on_step(step + 1, loss_value)
        if step % 50 == 0:
            logger.info("sft step %d loss %.4f", step, loss_value)
    seconds = time.perf_counter() - start
    torch.set_num_threads(default_threads)
    if chooser is not None and chooser.switches:
        logger.info("sft: torch threads switched %d time(s), last kept %d", chooser.switches, chooser.kept)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return SFTResult(out_dir, cfg.steps, loss_value, seconds, tokens / max(seconds, 1e-9),
                     threads_kept=chooser.kept if chooser else default_threads,
                     thread_switches=chooser.switches if chooser else 0)
