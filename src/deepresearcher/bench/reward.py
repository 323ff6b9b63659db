"""Reward benchmark: outcome rewards per second (cold and warm normalization cache) and format checks.

Answers and golds are generated (seeded) with the shape of real ones: TriviaQA-like alias lists of
1-30 aliases, answers of 1-12 words that share some words with a gold. The GRPO step scores
prompts × group size rollouts at once, so this bounds what the reward costs per step.

    deepresearcher bench reward --json
    deepresearcher bench reward --rollouts 65536 --json
"""

from __future__ import annotations

import argparse
import random
import time

from deepresearcher.reward import check_format, score_batch
from deepresearcher.reward.metrics import normalize_answer


def _batch(n: int, seed: int) -> tuple[list[str], list[list[str]], list[list[str]]]:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)] + ["the", "a", "an", "Über", "1988", "U.S."]
    answers, golds, turns = [], [], []
    for _ in range(n):
        aliases = [" ".join(rng.choices(vocab, k=rng.randint(1, 4))) for _ in range(rng.randint(1, 30))]
        answer = " ".join(rng.sample(aliases[0].split(), 1) + rng.choices(vocab, k=rng.randint(0, 11)))
        answers.append(answer)
        golds.append(aliases)
        turns.append(
            ['<think>search it</think><tool_call>{"name": "web_search"}</tool_call>'] * rng.randint(0, 9)
            + [f"<think>done</think><answer>{answer}</answer>"]
        )
    return answers, golds, turns


def main(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="deepresearcher bench reward")
    parser.add_argument("--rollouts", type=int, default=8192, help="Rollouts scored per measurement.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    answers, golds, turns = _batch(args.rollouts, args.seed)
    normalize_answer.cache_clear()
    started = time.perf_counter()
    rewards = score_batch(answers, golds)
    cold = time.perf_counter() - started
    started = time.perf_counter()
    score_batch(answers, golds)
    warm = time.perf_counter() - started
    started = time.perf_counter()
    ok = sum(check_format(t).ok for t in turns)
    checks = time.perf_counter() - started
    return {
        "rollouts": args.rollouts,
        "mean_aliases": round(sum(map(len, golds)) / len(golds), 1),
        "rewards_per_s_cold": round(args.rollouts / cold),
        "rewards_per_s_warm": round(args.rollouts / warm),
        "format_checks_per_s": round(args.rollouts / checks),
        "mean_reward": round(sum(rewards) / len(rewards), 4),
        "format_ok": ok,
    }


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(main(sys.argv[1:])))
