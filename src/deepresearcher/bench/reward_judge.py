"""F1 against a judge: how often the two rewards disagree on the synthetic world's answers, and on which.

The oracle researcher answers the world's answerable test tasks through the real tools; each of its answers is
then written five ways, the ways a policy trained on F1 may learn to answer:

    exact     the oracle's answer as it wrote it
    verbose   the answer inside a sentence ("Having read the pages, the answer is X.")
    hedged    two candidates: a comparison's both names ("A or B"), "yes or no", else "X or Y" with Y the gold of
              another task of the same type and last relation
    partial   the first word of a multi-word answer ("Ferial" for "Ferial Drodruru")
    wrong     that other task's gold alone (a comparison's other name, the other of yes and no)

Every variant is scored as a one-turn rollout by ``reward.score_rollouts`` twice: ``reward.metric: f1`` and
``reward.metric: judge``. The judge is ``--judge scripted`` (the rule of ``testing.judge.commits_to_gold`` behind
the loopback OpenAI-compatible emulator: a gold as whole tokens and no hedge) or ``--judge embedded`` (SmolLM2-135M
on this machine). A disagreement is F1 >= 0.5 where the judge says incorrect, or F1 < 0.5 where it says correct.

    deepresearcher bench reward_judge --json
    deepresearcher bench reward_judge --judge embedded --prompt rearter --tasks 40
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from deepresearcher.config import Config, LLMClientConfig, load_config
from deepresearcher.reward import RewardJudge, score_rollouts
from deepresearcher.reward.judge import Judge
from deepresearcher.reward.metrics import normalize_answer
from deepresearcher.world import GENERATOR_VERSION

KINDS = ("exact", "verbose", "hedged", "partial", "wrong")


@dataclass
class _Turn:
    text: str


@dataclass
class _Rollout:
    turns: list[_Turn] = field(default_factory=list)
    question: str = ""


@dataclass(frozen=True)
class Variant:
    """One way of answering one task."""

    kind: str
    task_type: str
    question: str
    answer: str
    golds: tuple[str, ...]


def _options(task: Any) -> list[str]:
    """The two names a comparison or two_page question is about (the subjects of its two hops)."""
    return [hop.subject for hop in task.chain]


def variants(task: Any, answer: str, rival: str) -> list[Variant]:
    """The five answers of one task (``partial`` only for answers of several words), ``rival`` a wrong answer."""
    if task.type == "comparison":
        first, second = _options(task)
        rival = second if normalize_answer(answer) == normalize_answer(first) else first
        hedge = f"{first} or {second}"
    elif task.type == "two_page":
        rival, hedge = ("no" if normalize_answer(answer) == "yes" else "yes"), "yes or no"
    else:
        hedge = f"{answer} or {rival}"
    verbose = (f"{answer.capitalize()}, both were born in the same city." if task.type == "two_page" and answer == "yes"
               else f"{answer.capitalize()}, they were born in different cities." if task.type == "two_page"
               else f"Having read the pages, the answer is {answer}.")
    out = {"exact": answer, "verbose": verbose, "hedged": hedge, "wrong": rival}
    words = [w for w in answer.split() if normalize_answer(w)]  # "The Last Orchard": "Last", not the article
    if len(words) > 1:
        out["partial"] = words[0]
    return [Variant(kind, task.type, task.question, text, tuple(task.golds)) for kind, text in out.items()]


async def _oracle_answers(config: Config, tasks: list[Any]) -> list[str]:
    from deepresearcher.agent.tools import ToolBox
    from deepresearcher.train.oracle import OracleResearcher
    from deepresearcher.web import make_environment

    env = make_environment(config)
    try:
        toolbox = ToolBox(env, config)
        return [(await OracleResearcher(toolbox).run(task)).answer for task in tasks]
    finally:
        await env.aclose()


def world_variants(config: Config, limit: int, seed: int) -> tuple[list[Variant], int]:
    """Variants of the oracle's answers to the first ``limit`` answerable test tasks of the configured world
    (every comparison and two_page task among them too, as those are where hedging pays), and how many tasks
    were left out because the oracle's answer was not a gold."""
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world.build import load_tasks

    tasks = [t for t in load_tasks(ensure_world(config), "test") if t.answerable]
    chosen = [t for t in tasks if t.type in ("comparison", "two_page")]
    chosen += [t for t in tasks if t not in chosen][: max(limit - len(chosen), 0)]
    answers = asyncio.run(_oracle_answers(config, chosen))
    by_group: dict[tuple[str, str], list[str]] = defaultdict(list)
    for task in tasks:
        by_group[(task.type, task.chain[-1].relation)].append(task.golds[0])
    rng = random.Random(seed)
    out: list[Variant] = []
    missed = 0
    for task, answer in zip(chosen, answers, strict=True):
        golds = {normalize_answer(a) for a in task.golds}
        if normalize_answer(answer) not in golds:
            missed += 1
            continue
        others = [g for g in by_group[(task.type, task.chain[-1].relation)] if normalize_answer(g) not in golds]
        out += variants(task, answer, rng.choice(others) if others else "unknown")
    return out, missed


@dataclass(frozen=True)
class Scores:
    """Every variant's folded F1 (``reward.metric: f1``), the paper's F1 and the judge's verdict (1 or 0)."""

    f1: list[float]
    paper_f1: list[float]
    judge: list[float]

    def at(self, idx: list[int]) -> Scores:
        return Scores([self.f1[i] for i in idx], [self.paper_f1[i] for i in idx], [self.judge[i] for i in idx])


def judged_rewards(items: list[Variant], config: Config, judge: RewardJudge) -> Scores:
    """The rewards of every variant as a one-turn rollout, through the scorer training calls."""
    rollouts = [_Rollout([_Turn(f"Done.</think>\n<answer>{v.answer}</answer>")], v.question) for v in items]
    golds = [list(v.golds) for v in items]
    f1 = score_rollouts(rollouts, golds, config=config.reward.model_copy(update={"metric": "f1"}))
    judged = score_rollouts(rollouts, golds, config=config.reward, judge=judge)
    return Scores([s.reward for s in f1], [s.metrics["deepresearcher_f1"] for s in f1],
                  [s.metrics["reward_judge"] for s in judged])


_TWO = ("comparison", "two_page")
"""Task types whose answer is one of two candidates the question names (two names, or yes and no)."""


def _row(name: str, scores: Scores, disagreements: bool = True) -> dict[str, Any]:
    n = len(scores.f1)
    pairs = list(zip(scores.f1, scores.judge, strict=True))
    return {
        "kind": name, "n": n,
        "mean_f1": round(sum(scores.f1) / n, 3),
        "mean_paper_f1": round(sum(scores.paper_f1) / n, 3),
        "judge_correct": round(sum(scores.judge) / n, 3),
        "f1_pays_judge_refuses": sum(a >= 0.5 and not b for a, b in pairs) if disagreements else None,
        "judge_pays_f1_does_not": sum(a < 0.5 and b == 1.0 for a, b in pairs) if disagreements else None,
        "mean_abs_gap": round(sum(abs(a - b) for a, b in pairs) / n, 3),
    }


def table(items: list[Variant], scores: Scores) -> list[dict[str, Any]]:
    """Per answer kind (and all together): mean F1s, the judge's correct share, and the two disagreements; then,
    per two-candidate task type (comparison, two_page), the hedge beside a coin's pick between the two (its
    expected reward: half the exact answer's, half the wrong one's)."""
    rows = []
    for kind in (*KINDS, "all"):
        idx = [i for i, v in enumerate(items) if kind in ("all", v.kind)]
        if idx:
            rows.append(_row(kind, scores.at(idx)))
    for task_type in _TWO:
        hedged = [i for i, v in enumerate(items) if v.kind == "hedged" and v.task_type == task_type]
        pairs = [(i, j) for i, j in _pairs(items, "exact", "wrong") if items[i].task_type == task_type]
        if not hedged or not pairs:
            continue
        rows.append(_row(f"hedged, {task_type}", scores.at(hedged)))
        exact, wrong = scores.at([i for i, _ in pairs]), scores.at([j for _, j in pairs])
        coin = Scores(*([(a + b) / 2 for a, b in zip(x, y, strict=True)] for x, y in
                        ((exact.f1, wrong.f1), (exact.paper_f1, wrong.paper_f1), (exact.judge, wrong.judge))))
        rows.append(_row(f"coin pick, {task_type} (expected)", coin, disagreements=False))
    return rows


def _pairs(items: list[Variant], first: str, second: str) -> list[tuple[int, int]]:
    """Indices of the ``first`` and ``second`` variants of each task that has both."""
    at = {(v.question, v.kind): i for i, v in enumerate(items)}
    return [(i, at[(v.question, second)]) for i, v in enumerate(items)
            if v.kind == first and (v.question, second) in at]


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| answer | n | F1 | paper's F1 | judge: correct | F1 >= 0.5, judge: incorrect | F1 < 0.5, judge: correct "
             "| mean abs(F1 - judge) |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['kind']} | {r['n']} | {r['mean_f1']:.2f} | {r['mean_paper_f1']:.2f} "
              f"| {100 * r['judge_correct']:.0f}% | {_count(r['f1_pays_judge_refuses'])} "
              f"| {_count(r['judge_pays_f1_does_not'])} | {r['mean_abs_gap']:.2f} |" for r in rows]
    return "\n".join(lines)


def _count(value: int | None) -> str:
    return "—" if value is None else str(value)


def _run(items: list[Variant], config: Config, client: LLMClientConfig | None) -> tuple[Scores, dict[str, int]]:
    from deepresearcher.llm import make_chat_client
    from deepresearcher.testing.judge import scripted_judge
    from deepresearcher.testing.openai_server import OpenAIEmulator

    def judge_on(settings: LLMClientConfig) -> RewardJudge:
        reward = config.reward
        return RewardJudge(Judge(make_chat_client(settings), model_name=settings.model or settings.kind,
                                 prompt=reward.judge_prompt, attempts=reward.judge_attempts))

    if client is not None:
        judge = judge_on(client)
        try:
            scores = judged_rewards(items, config, judge)
        finally:
            judge.close()
        return scores, dict(judge.counts)
    with OpenAIEmulator(responder=scripted_judge()).running() as server:
        judge = judge_on(LLMClientConfig(kind="openai", base_url=server.base_url, model="scripted", concurrency=32))
        try:
            scores = judged_rewards(items, config, judge)
        finally:
            judge.close()
    return scores, dict(judge.counts)


def main(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="deepresearcher bench reward_judge")
    parser.add_argument("--tasks", type=int, default=120, help="Answerable world test tasks (comparisons and "
                        "two_page tasks always included).")
    parser.add_argument("--judge", choices=("scripted", "embedded"), default="scripted")
    parser.add_argument("--prompt", choices=("rearter", "deepresearcher"), default="rearter")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the wrong answers' draw.")
    parser.add_argument("--set", action="append", default=[], help="Config override (world.seed=8, ...).")
    args = parser.parse_args(argv)
    config = load_config(overrides=["reward.metric=judge", "reward.judge.kind=embedded",
                                    f"reward.judge_prompt={args.prompt}", *args.set])
    started = time.perf_counter()
    items, missed = world_variants(config, args.tasks, args.seed)
    client = LLMClientConfig(kind="embedded", max_batch=16) if args.judge == "embedded" else None
    scores, counts = _run(items, config, client)
    rows = table(items, scores)
    return {
        "judge": args.judge, "prompt": args.prompt,
        "world": {"seed": config.world.seed, "size": config.world.size, "generator_version": GENERATOR_VERSION},
        "oracle_missed": missed, "variants": len(items), "verdicts_by": counts,
        "rows": rows, "markdown": markdown(rows),
        "seconds": round(time.perf_counter() - started, 1), "machine": f"{os.cpu_count()} CPUs, {platform.machine()}",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
    }


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(main(sys.argv[1:])))
