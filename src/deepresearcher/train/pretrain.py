"""Pretraining of the quickstart's from-scratch model: the next-token loss on the world's pages.

A model with random weights must learn to copy names from its context before it can research: the
oracle's episodes ask for it (the query repeats a name from the question, the browse call a URL from the
search results, the answer a value from the page). Under SFT alone that ability appears late and
abruptly: after 600 of the quickstart's 900 steps the model still copied nothing. The world's pages name
each entity several times (title, lead, infobox row, prose), so a few hundred steps on them, each a
batch of short texts that costs a fraction of an SFT step, teach the copying first, and SFT builds on
it (the dev-world measurements are in docs/train.md).

Example::

    pretrain_on_texts("runs/quickstart/base_model", page_texts, config.train.pretrain, out_dir)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from deepresearcher.config import PretrainConfig
from deepresearcher.errors import ConfigError
from deepresearcher.train.sft import FitResult, fit_next_token, length_bucketed_batches, pad_rows


def page_batches(sequences: list[list[int]], batch_size: int, seed: int, pad_id: int) -> Iterator[tuple[Any, Any, Any]]:
    """Endless batches of ``batch_size`` pages of similar length (SFT's bucketing: pages run from a few dozen
    tokens to ``max_seq_len``, and random batches would spend about half their compute on padding), every
    token predicted with weight 1."""
    for indices in length_bucketed_batches([len(ids) for ids in sequences], batch_size, seed):
        yield pad_rows([(sequences[i], [1.0] * len(sequences[i])) for i in indices], pad_id)


def pretrain_on_texts(
    model_path: str | Path, texts: list[str], cfg: PretrainConfig, out_dir: Path, *,
    bf16: bool = False, on_step: Callable[[int, float], None] | None = None,
) -> FitResult:
    """Train ``model_path`` for ``cfg.steps`` steps on ``texts`` (each cut to ``cfg.max_seq_len`` tokens) and
    save model and tokenizer to ``out_dir``. AdamW, linear warmup, then a constant learning rate: SFT
    follows with its own schedule."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if cfg.steps < 1:
        raise ConfigError("train.pretrain.steps is 0: pretraining is off, so there is nothing to run.")
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    sequences = [ids[: cfg.max_seq_len] for ids in tokenizer(texts)["input_ids"] if len(ids) >= 2]
    if not sequences:
        raise ValueError("pretraining needs at least one text of two or more tokens")
    model = AutoModelForCausalLM.from_pretrained(str(model_path))
    model.train()
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / max(1, cfg.warmup_steps)))
    batches = page_batches(sequences, cfg.batch_size, cfg.seed, pad_id)
    start = time.perf_counter()
    tokens, loss_value = fit_next_token(model, (next(batches) for _ in range(cfg.steps)), optimizer, scheduler,
                                        bf16=bf16, on_step=on_step, name="pretrain")
    seconds = time.perf_counter() - start
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return FitResult(out_dir, cfg.steps, loss_value, seconds, tokens / max(seconds, 1e-9))
