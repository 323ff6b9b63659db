"""Write a sample of a quickstart run's held-out episodes, with their tasks, as a test fixture.

The behaviour measures (``eval.behaviours``) must read both ways on what a trained model really does, not only
on scripted researchers: ``tests/eval/test_behaviours_model.py`` reads the episodes this script keeps. Each line
is one episode of the run's evaluation after SFT or after GRPO (12 of each task type, all of the conflict tasks):
the stage, the task as the world states it (its
chain, evidence and contradicting pages: the labels the measures need), the question, the answer and the turns
with their tool calls and raw observations, exactly as the run recorded them.

Usage (after ``deepresearcher quickstart``, whose worlds are still in the cache)::

    .venv/bin/python scripts/episodes_fixture.py runs/quickstart tests/eval/quickstart_episodes.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import random
from collections import defaultdict
from pathlib import Path

import orjson

from deepresearcher.config import load_config
from deepresearcher.train.tasks import task_sets

STAGES = {"after SFT": "eval_after_sft.jsonl", "after GRPO": "eval_after_grpo.jsonl"}


def sample_rows(rows: list[dict], per_type: int, whole: set[str], rng: random.Random) -> list[dict]:
    """``per_type`` rows of each task type, drawn at random (seeded), and every row of the types in ``whole``;
    in the run's order."""
    by_type: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        by_type[row["type"]].append(i)
    keep = {i for kind, indices in by_type.items()
            for i in (indices if kind in whole else rng.sample(indices, min(per_type, len(indices))))}
    return [row for i, row in enumerate(rows) if i in keep]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a quickstart run directory (config.yaml, eval_after_*.jsonl)")
    parser.add_argument("out", type=Path, help="the fixture to write (.jsonl.gz)")
    parser.add_argument("--per-type", type=int, default=12, help="episodes of each task type per stage")
    parser.add_argument("--whole", nargs="*", default=["conflict"],
                        help="task types kept whole: the conflict measures have cases on conflict tasks only, and a "
                             "trained model's rare beliefs (the contradicting value) show only among all of them")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    config = load_config(args.run_dir / "config.yaml")
    tasks = {task["id"]: task for task in task_sets(config).test}
    rng = random.Random(args.seed)
    lines = []
    for stage, name in STAGES.items():
        rows = [orjson.loads(line) for line in (args.run_dir / name).read_bytes().splitlines() if line.strip()]
        for row in sample_rows(rows, args.per_type, set(args.whole), rng):
            lines.append({"stage": stage, "task": tasks[row["id"]], "f1": row["f1"], "question": row["question"],
                          "answer": row["answer"], "termination": row["termination"], "turns": row["turns"]})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(gzip.compress(b"".join(orjson.dumps(line) + b"\n" for line in lines), mtime=0))
    print(f"{len(lines)} episodes ({', '.join(STAGES)}) from {args.run_dir} -> {args.out}")


if __name__ == "__main__":
    main()
