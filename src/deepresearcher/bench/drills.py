"""Can the quickstart's tiny model learn the two-entity check at all? Check drills alone, a learning curve.

Workload: the quickstart recipe's tiny Qwen2 shape (``train.tiny_model``, fresh weights, a tokenizer trained
on the drills' text), trained on check drills only (``warmstart/drills.py``: the question, the last thought that
states both values, the answer; loss on the answer only) from the quickstart's training worlds, a new batch
of drills every step, with the quickstart's SFT optimizers (Muon and AdamW, ``train.sft``). Every
``--eval-every`` steps, the accuracy on drills from the dev world: the share where the right answer's
log-probability beats the other candidate's (the other name of a comparison; yes against no). A coin scores 0.5.

What it answers: whether the step the quickstart's agent fails on, once both values are written side by side
(docs/train.md, "Two-entity tasks"), is learnable by this model and in how many examples; the quickstart's
SFT sees ~16,000 episodes, ~10% of them two-entity tasks.

    deepresearcher bench drills --json
    deepresearcher bench drills --steps 600 --batch 32 --kind two_page
    deepresearcher bench drills --kind comparison --direction larger   # the order of two values, no XOR
    deepresearcher bench drills --kind comparison --split-digits       # every digit its own token
    deepresearcher bench drills --model smollm2-135m --steps 0 --eval-every 1   # a pretrained model, untrained here
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path


def _candidates(drill) -> list[str]:
    return ["yes", "no"] if drill.answer in ("yes", "no") else list(drill.subjects)


def select(drills: list, kind: str, direction: str) -> list:
    """The drills of one ``kind`` (comparison, two_page, both); ``direction="larger"`` keeps the comparisons that
    ask for the later or larger value, whose answer follows from the two values alone: in the others the
    question's word (earlier, later) flips it, so the answer is the XOR of the word and the values' order."""
    from deepresearcher.world.tasks import comparison_pick

    def keep(drill) -> bool:
        if drill.answer in ("yes", "no"):
            return kind != "comparison"
        return kind != "two_page" and (direction == "both" or comparison_pick(drill.question) is max)

    return [d for d in drills if keep(d)]


def main(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="deepresearcher bench drills")
    parser.add_argument("--steps", type=int, default=1500, help="Optimizer steps, a new batch of drills each.")
    parser.add_argument("--batch", type=int, default=64, help="Drills per step.")
    parser.add_argument("--eval-every", type=int, default=300)
    parser.add_argument("--eval-drills", type=int, default=400, help="Dev-world drills scored at each evaluation.")
    parser.add_argument("--kind", choices=["both", "comparison", "two_page"], default="both")
    parser.add_argument("--direction", choices=["both", "larger"], default="both",
                        help="larger: comparison drills that ask for the later or larger value only, so the answer "
                        "follows the two values alone and not their XOR with the question's earlier/later.")
    parser.add_argument("--layers", type=int, default=None, help="Hidden layers (default: the recipe's).")
    parser.add_argument("--split-digits", action="store_true", help="Every digit its own token (train.tiny_model.split_digits).")
    parser.add_argument("--model", default=None,
                        help="Score (and train) this checkpoint instead of a fresh tiny model: a checkpoint directory or "
                        "smollm2-135m; with --steps 0, what a pretrained model brings to the check.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.model and (args.layers or args.split_digits):
        parser.error("--layers and --split-digits shape a fresh tiny model; --model brings its own shape and tokenizer")

    import torch

    from deepresearcher.agent.session import make_template
    from deepresearcher.config import load_config
    from deepresearcher.inference.loader import load_trainable, resolve_checkpoint
    from deepresearcher.quickstart.tiny_model import build_tiny_checkpoint
    from deepresearcher.train.tasks import ensure_training_worlds
    from deepresearcher.warmstart.drills import check_drills, drill_rows
    from deepresearcher.warmstart.sft import next_token_loss, pad_rows, sft_optimizers
    from transformers import AutoTokenizer

    torch.manual_seed(args.seed)
    config = load_config("quickstart", ["train.eval_world=dev"])
    shape = config.train.tiny_model
    if args.layers:
        shape = shape.model_copy(update={"num_layers": args.layers})
    if args.split_digits:
        shape = shape.model_copy(update={"split_digits": True})
    train_worlds, dev_world = ensure_training_worlds(config)
    assert dev_world is not None  # the quickstart trains on several worlds and holds one out

    def drills(worlds: list[Path], count: int, seed: int) -> list:
        share = (0.5 if args.kind != "both" else 1.0) * (0.5 if args.direction == "larger" else 1.0)
        # check_drills(n) is a prefix of check_drills(m > n) for one seed: drawing more keeps the default kinds' drills
        return select(check_drills(worlds, int(2 * count / share), seed), args.kind, args.direction)[:count]

    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            model_dir = resolve_checkpoint(args.model, config.resolved_cache_dir())
        else:
            corpus = [f"{d.question} {d.thought(True)} {d.answer}" for d in drills(train_worlds, 20_000, seed=-1)]
            model_dir = build_tiny_checkpoint(corpus, Path(tmp) / "model", shape, seed=args.seed)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = load_trainable(model_dir)
    template = make_template(tokenizer, config)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    optimizers = sft_optimizers(model, config.train.sft)
    held_out = drills([dev_world], args.eval_drills, seed=10_000 + args.seed)

    def accuracy() -> dict[str, float]:
        model.eval()
        right = {"comparison": [], "two_page": []}
        with torch.no_grad():
            for drill in held_out:
                options = [dataclasses.replace(drill, answer=c) for c in _candidates(drill)]
                ids, mask, weights = pad_rows(drill_rows(options, template, terse=True), pad_id, device=model.device)
                logps = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits[:, :-1].float(), -1)
                scores = (logps.gather(-1, ids[:, 1:, None])[..., 0] * weights[:, 1:]).sum(-1)
                kind = "two_page" if drill.answer in ("yes", "no") else "comparison"
                right[kind].append(float(options[int(scores.argmax())].answer == drill.answer))
        model.train()
        every = [r for rows in right.values() for r in rows]
        return {"all": sum(every) / len(every), **{k: sum(v) / len(v) for k, v in right.items() if v}}

    pool = drill_rows(drills(train_worlds, args.steps * args.batch, seed=args.seed), template, terse=True)
    curve, start = [], time.perf_counter()
    for step in range(args.steps + 1):
        if step % args.eval_every == 0 or step == args.steps:
            curve.append({"step": step, "drills_seen": step * args.batch, "accuracy": accuracy(),
                          "seconds": round(time.perf_counter() - start, 1)})
        if step == args.steps:
            break
        loss = next_token_loss(model, *pad_rows(pool[step * args.batch : (step + 1) * args.batch], pad_id,
                                                device=model.device))
        model.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        for optimizer in optimizers:
            optimizer.step()
    return {"benchmark": "drills", "kind": args.kind, "direction": args.direction, "model": args.model or "tiny",
            "layers": model.config.num_hidden_layers, "split_digits": None if args.model else shape.split_digits,
            "batch": args.batch, "optimizer": config.train.sft.optimizer, "chance": 0.5, "curve": curve}
