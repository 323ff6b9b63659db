"""``deepresearcher eval``: rollouts on benchmark questions, scored, written as they finish, then reported.

One output folder, no renaming between steps::

    <out>/config.yaml          the resolved config of the first run (reruns must match it to resume)
    <out>/trajectories.jsonl   one scored rollout per line, appended the moment it ends
    <out>/metrics.json         the table, every number with its settings (see ``report.py``)
    <out>/report.md            the table as Markdown
    <out>/report.html          the table plus every trajectory as a conversation (``deepresearcher.reports``)

Resume: a rerun reads ``trajectories.jsonl`` and runs only the (benchmark, task id, sample) keys that
are not there yet; a line torn by a kill is cut off first. A rerun with different settings that change
answers (policy, search, reader, decoding, judge) is refused instead of mixing two evals in one table.

Any generator of ``agent.policy`` works (embedded SmolLM2, a checkpoint directory, vLLM, an
OpenAI-compatible server) and any ``agent.protocol``; decoding follows ``eval.temperature`` (0: greedy) and
sample ``i`` of every question asks the generator for seed ``eval.seed + i`` (servers honour it; local
transformers generators draw from their own seeded generator).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from deepresearcher.config import Config, LLMClientConfig, dump_config
from deepresearcher.data import QATask, load_benchmark, load_file
from deepresearcher.errors import ConfigError, DataError
from deepresearcher.eval.report import write_reports
from deepresearcher.generate.base import GenerationResult, Generator, SamplingParams
from deepresearcher.reward import ANSWER_SPLIT

__all__ = [
    "TRAJECTORIES",
    "EvalResult",
    "data_file_split",
    "file_benchmarks",
    "judge_behaviour",
    "judge_trajectory",
    "load_eval_tasks",
    "read_records",
    "run_eval",
    "world_baselines",
]

logger = logging.getLogger(__name__)

TRAJECTORIES = "trajectories.jsonl"
WORLD = "world"

RecordCallback = Callable[[dict[str, Any]], None]


@dataclass
class EvalResult:
    """What an eval produced: where, how many rollouts ran now and in total, and the summary."""

    out: Path
    ran: int
    total: int
    metrics: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- tasks


def _world_tasks(config: Config, split: str, limit: int | None) -> list[QATask]:
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    types = config.eval.world_types
    tasks = [t for t in load_tasks(ensure_world(config), split) if types is None or t.type in types][:limit]
    return [
        QATask(id=t.id, source=WORLD, question=t.question, golds=t.golds, split=split,
               metadata={"type": t.type, "answerable": t.answerable, "evidence_urls": t.evidence_urls,
                         "chain": t.to_dict()["chain"]})
        for t in tasks
    ]


def load_eval_tasks(config: Config, data_file: str | Path | None = None) -> dict[str, list[QATask]]:
    """Tasks per benchmark label, in ``eval.benchmarks`` order.

    A label is a benchmark name, or ``name:split`` when the split is not ``eval.split``. With
    ``data_file`` (a file of several benchmarks, e.g. DeepResearcher's parquet) the rows are grouped by
    their source and ``eval.benchmarks`` selects among them (all of them when it is left at its default).
    """
    ev = config.eval
    if data_file is not None:
        tasks = load_file(data_file, split=data_file_split(config, data_file))
        grouped: dict[str, list[QATask]] = {}
        for task in tasks:
            grouped.setdefault(task.source, []).append(task)
        return {b: grouped[b][: ev.limit] for b in file_benchmarks(config, data_file, grouped)}
    out: dict[str, list[QATask]] = {}
    for spec in ev.benchmarks:
        name, _, split = spec.strip().partition(":")
        label = spec.strip() if split and split != ev.split else name
        if name == WORLD:  # the world's own splits: train, dev, test
            out[label] = _world_tasks(config, split or "test", ev.limit)
        else:
            out[label] = load_benchmark(name, split or ev.split, limit=ev.limit, data_dir=ev.data_dir)
        if not out[label]:
            raise DataError(f"Benchmark {spec!r} has no questions; check its split and data files.")
    return out


def file_benchmarks(config: Config, data_file: str | Path, grouped: dict[str, list[QATask]]) -> list[str]:
    """The benchmarks of a data file's rows (``grouped`` by source) that the eval runs: those
    ``eval.benchmarks`` names, or all of them when it is left at its default; a DataError if none."""
    wanted = [b.split(":")[0] for b in config.eval.benchmarks]
    keep = [b for b in wanted if b in grouped] if "benchmarks" in config.eval.model_fields_set else list(grouped)
    if not keep:
        held = ", ".join(f"{s} (rows without a data_source)" if s == "unknown" else s for s in sorted(grouped))
        raise DataError(
            f"{data_file} has no rows of the benchmarks eval.benchmarks asks for ({', '.join(wanted)}); "
            f"its rows are from: {held or 'none (the file is empty)'}. Name those with --benchmarks, or give "
            "the rows a data_source."
        )
    return keep


def data_file_split(config: Config, data_file: str | Path) -> str:
    """The split label of a data file's rows: ``eval.split`` when set explicitly, else the file's stem (dev.parquet: dev)."""
    return config.eval.split if "split" in config.eval.model_fields_set else Path(data_file).stem


def world_baselines(config: Config, tasks: dict[str, list[QATask]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per world benchmark label: the no-tools baselines, fitted on the world's train split, beside the
    policy's F1 per task type and its margin over the best baseline (``eval.baselines``)."""
    from deepresearcher.eval.baselines import fit_baselines, model_f1_by_type, model_f1_se_by_type
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    labels = [label for label, group in tasks.items() if group and group[0].source == WORLD]
    if not labels:
        return {}
    root = ensure_world(config)
    baselines = fit_baselines(load_tasks(root, "train"))
    out = {}
    for label in labels:
        split = tasks[label][0].split
        by_id = {t.id: t for t in load_tasks(root, split)} if split in ("train", "dev", "test") else {}
        if any(t.id not in by_id for t in tasks[label]):  # rows of a file, not the configured world's own tasks
            continue
        evaluated = [by_id[t.id] for t in tasks[label]]
        rows = [r for r in records if r["benchmark"] == label]
        types = {t.id: t.type for t in evaluated}
        out[label] = baselines.evaluate(evaluated).to_dict(model_f1=model_f1_by_type(rows, types),
                                                           model_f1_se=model_f1_se_by_type(rows, types))
    return out


# ---------------------------------------------------------------------------------------------- records


def _key(benchmark: str, task_id: str, sample: int) -> tuple[str, str, int]:
    return (benchmark, task_id, sample)


def read_records(path: str | Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """Scored rollouts of a trajectories file; a torn last line (a kill mid-write) is skipped or cut off."""
    path = Path(path)
    if not path.is_file():
        return []
    data = path.read_bytes()
    records = []
    good_end = 0
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break
        try:
            records.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            break
        good_end += len(line)
    if good_end < len(data):
        logger.warning("%s: %d bytes of a torn last record %s", path, len(data) - good_end,
                       "cut off" if repair else "ignored")
        if repair:
            with path.open("r+b") as handle:
                handle.truncate(good_end)
    return records


# Config sections whose values change a rollout's answer or score; the rest (serving, caching, batching)
# may differ between an eval and its resumption.
_ANSWER_SECTIONS = ("world", "search", "browse", "agent", "reader_llm", "fetch", "reward", "backends", "eval")
_FREE_KEYS = {
    "eval.limit", "eval.benchmarks", "eval.concurrency", "eval.samples", "eval.data_dir",
    "agent.max_concurrent_generations", "agent.max_concurrent_tools", "agent.max_batch_size", "agent.batch_wait_ms",
}


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _answer_settings(config_data: dict[str, Any]) -> dict[str, Any]:
    """The flattened settings that change answers (see ``_ANSWER_SECTIONS``), minus the ones a resume may change."""
    flat = _flat({k: v for k, v in config_data.items() if k in _ANSWER_SECTIONS})
    return {k: v for k, v in flat.items() if k not in _FREE_KEYS}


def settings_conflicts(saved: dict[str, Any], config: Config) -> list[str]:
    """Answer-changing settings that differ between a saved config and ``config``, as ``key: old -> new``.

    Keys present on one side only are ignored: a newer version of deepresearcher may add fields.
    """
    old, new = _answer_settings(saved), _answer_settings(config.model_dump(mode="json"))
    return [f"{k}: {old[k]!r} -> {new[k]!r}" for k in old if k in new and old[k] != new[k]]


# ---------------------------------------------------------------------------------------------- scoring


async def judge_trajectory(trajectory: Any, task: QATask, judge: Any, config: Config) -> dict[str, Any]:
    """The scored record of one rollout: ``reward.score_rollout``'s reward and metrics, plus the judges' verdicts.

    ``mbe`` is the paper's MBE as its evaluation script computed it: the answer it took (``original_answer``),
    the question verbatim and the golds as the row spelled them. ``judge`` is ``eval.judge_prompt``'s verdict:
    the same one when that prompt is the paper's, else ReARTeR's on the answer our format check found. Under a
    judge reward (``reward.metric: judge``) the reward's own judge (``reward.reward_judge``, the run's cache) is
    awaited without holding up the other rollouts.
    """
    from deepresearcher.endpoint.programs import answer_view
    from deepresearcher.reward import JUDGE_METRICS, ascore_rollouts, reward_judge

    reward_of = reward_judge(config) if config.reward.metric in JUDGE_METRICS else None
    (scored,) = await ascore_rollouts([answer_view(trajectory)], [task.golds], answerable=[task.metadata.get("answerable")],
                                      questions=[task.question], config=config.reward, judge=reward_of)
    verdicts: dict[str, dict[str, Any] | None] = {"mbe": None, "judge": None}
    if judge is not None:
        mbe_judge = judge if judge.prompt.name == "deepresearcher" else judge.with_prompt("deepresearcher")
        golds = task.metadata.get("ground_truth", ANSWER_SPLIT.join(task.golds)).split(ANSWER_SPLIT)
        verdicts["mbe"] = (await mbe_judge.judge(task.question, scored.original_answer, golds)).to_dict()
        if scored.unanswerable:
            verdicts["judge"] = {"correct": bool(scored.metrics["em"]), "by": "unanswerable", "reply": "", "asked": 0,
                                 "unparsed": 0}
        elif mbe_judge is judge:
            verdicts["judge"] = verdicts["mbe"]
        else:
            verdicts["judge"] = (await judge.judge(task.question, scored.answer, task.golds)).to_dict()
    record: dict[str, Any] = dict(scored.metrics)
    for name, verdict in verdicts.items():
        record[name] = None if verdict is None else float(verdict["correct"])
        record[f"{name}_by"] = None if verdict is None else verdict["by"]
        record[f"{name}_reply"] = None if verdict is None else verdict["reply"]
    record["judge_asked"] = record["judge_unparsed"] = None
    if judge is not None:  # the judge column may be the MBE verdict itself: count its calls once
        calls = [verdicts["mbe"]] if verdicts["judge"] is verdicts["mbe"] else [verdicts["mbe"], verdicts["judge"]]
        record["judge_asked"] = sum(v["asked"] for v in calls)
        record["judge_unparsed"] = sum(v["unparsed"] for v in calls)
    return {
        **record,
        "original_answer": scored.original_answer,
        "format_ok": scored.format_ok,
        "format_reason": scored.format_reason,
        "reward": scored.reward,
    }


async def judge_behaviour(trajectory: Any, task: QATask, judge: Any) -> dict[str, Any]:
    """The rollout's research behaviours (``eval.behaviours``: the task's labels on world tasks, heuristics on
    real questions); with a ``judge``, its own label of the grounding (``judged_grounded``: None without a verdict)
    for the report's agreement with the rule."""
    from deepresearcher.eval.behaviours import behaviour_record, observed_text
    from deepresearcher.eval.judge import supported

    record = behaviour_record(trajectory, task).to_dict()
    if judge is not None and record["grounded"] is not None:
        verdict = await supported(judge, task.question, trajectory.answer or "", observed_text(trajectory))
        record["judged_grounded"] = verdict.correct if verdict.by == "model" else None
    return record


# ---------------------------------------------------------------------------------------------- rollouts


class _SeededGenerator:
    """A generator view that asks for one seed on every request of its samples (servers honour it)."""

    def __init__(self, inner: Generator, seed: int) -> None:
        self.inner, self.seed = inner, seed
        self.exact_tokens = getattr(inner, "exact_tokens", True)
        self.max_context = getattr(inner, "max_context", None)

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        if params.seed is None and params.temperature > 0:
            params = params.model_copy(update={"seed": self.seed})
        return await self.inner.generate(prompt_ids, params)

    async def aclose(self) -> None:  # the shared generator is closed once, by the runner
        return None


def _check_decoding(config: Config) -> None:
    if config.eval.samples > 1 and config.eval.temperature == 0:
        raise ConfigError(
            f"eval.samples={config.eval.samples} with eval.temperature=0 gives {config.eval.samples} identical "
            "greedy rollouts; set eval.temperature (e.g. 1.0) for pass@k, or eval.samples=1."
        )


def _prepare_out(out: Path, config: Config) -> None:
    out.mkdir(parents=True, exist_ok=True)
    saved = out / "config.yaml"
    if saved.is_file() and (out / TRAJECTORIES).is_file():
        import yaml

        conflicts = settings_conflicts(yaml.safe_load(saved.read_text(encoding="utf-8")) or {}, config)
        if conflicts:
            raise ConfigError(
                f"{out} holds an eval with other settings ({'; '.join(conflicts[:8])}); pass a new --out, "
                f"or the settings of {saved} to resume it."
            )
    saved.write_text(dump_config(config), encoding="utf-8")


def _make_judge(config: Config, judge_config: LLMClientConfig) -> Any:
    """The judge of ``eval.judge``, caching its verdicts in the web cache unless caching is off."""
    from deepresearcher.eval.judge import Judge
    from deepresearcher.llm import make_chat_client

    cache = None
    if config.cache.mode != "off":
        from deepresearcher.web.cache import WebCache

        cache = WebCache.from_config(config.cache, config.resolved_cache_dir())
    return Judge(make_chat_client(judge_config), cache=cache, model_name=judge_config.model or judge_config.kind,
                 prompt=config.eval.judge_prompt, attempts=config.eval.judge_attempts)


def _program_episodes(config: Config, generator: Generator, tokenizer: Any) -> Any:
    """``eval --agent``: the episodes of ``train.agent``'s program against ``generator`` behind the endpoint,
    decoded as ``eval`` decodes and limited to ``agent.max_turns`` requests, as the project's own loop is."""
    from deepresearcher.endpoint.programs import ProgramEpisodes
    from deepresearcher.endpoint.server import endpoint_for

    assert config.train.agent is not None
    endpoint = endpoint_for(config, generator, tokenizer, model_name=config.agent.policy, training=False,
                            layout=config.train.agent.layout, turn_limit=True)
    return ProgramEpisodes(config.train.agent, endpoint)


async def _run_pending(
    config: Config,
    pending: list[tuple[str, QATask, int]],
    path: Path,
    on_record: RecordCallback | None,
    policy: tuple[Generator, Any] | None = None,
) -> int:
    from deepresearcher.agent.loop import RolloutTask
    from deepresearcher.agent.session import open_session

    ran = 0
    async with contextlib.AsyncExitStack() as stack:  # closes whatever was opened, in reverse, on any exit
        judge = None
        if config.eval.judge is not None:
            judge = _make_judge(config, config.eval.judge)
            stack.push_async_callback(judge.aclose)
        session = await stack.enter_async_context(open_session(config, policy=policy, decoding="eval"))
        handle = stack.enter_context(path.open("ab"))
        samples = sorted({s for _, _, s in pending})
        generators = {sample: _SeededGenerator(session.generator, config.eval.seed + sample) for sample in samples}
        if config.train.agent is None:
            engines = {sample: session.engine(generator=generators[sample]) for sample in samples}
        else:  # eval --agent: the program once per question, against the policy behind the endpoint
            programs = {sample: await stack.enter_async_context(_program_episodes(config, generators[sample],
                                                                                  session.tokenizer))
                        for sample in samples}
        slots = asyncio.Semaphore(config.eval.concurrency)

        async def episode(benchmark: str, task: QATask, sample: int) -> Any:
            if config.train.agent is None:
                return await engines[sample].run(RolloutTask(task_id=task.id, question=task.question, golds=task.golds,
                                                             metadata={"benchmark": benchmark, "sample": sample}))
            from deepresearcher.endpoint.programs import ProgramTask

            trajectory = await programs[sample].run(ProgramTask(task.id, task.question, session.toolboxes[0],
                                                                tuple(task.golds)))
            trajectory.metadata.update({"benchmark": benchmark, "sample": sample})
            return trajectory

        async def one(benchmark: str, task: QATask, sample: int) -> None:
            nonlocal ran
            async with slots:
                trajectory = await episode(benchmark, task, sample)
                scored = await judge_trajectory(trajectory, task, judge, config)
                behaviour = await judge_behaviour(trajectory, task, judge if config.eval.judge_grounding else None)
            record = {
                "benchmark": benchmark, "task_id": task.id, "sample": sample,
                "seed": config.eval.seed + sample, "split": task.split, "question": task.question,
                "golds": task.golds, "answer": trajectory.answer, "termination": trajectory.termination,
                "turns": len(trajectory.turns), "seconds": trajectory.metadata.get("seconds", 0.0),
                **scored, "behaviour": behaviour, "trajectory": trajectory.model_dump(mode="json"),
            }
            handle.write(orjson.dumps(record) + b"\n")  # one write per record, synced: a kill loses no finished one
            handle.flush()
            os.fsync(handle.fileno())
            ran += 1
            if on_record is not None:
                on_record(record)

        jobs = [asyncio.ensure_future(one(*item)) for item in pending]
        try:
            await asyncio.gather(*jobs)
        finally:  # one failure (a dead generator) cancels the rest; finished records are already on disk
            for job in jobs:
                job.cancel()
            await asyncio.gather(*jobs, return_exceptions=True)
    return ran


def run_eval(
    config: Config,
    out: str | Path,
    *,
    data_file: str | Path | None = None,
    on_record: RecordCallback | None = None,
    on_start: Callable[[int, int], None] | None = None,
    policy: tuple[Generator, Any] | None = None,
) -> EvalResult:
    """Run (or resume) an eval into ``out`` and write its metrics and reports.

    ``on_start(pending, total)`` is called once the work is known; ``on_record(record)`` after each rollout.
    ``policy`` is a ``(generator, tokenizer)`` pair to use instead of building ``agent.policy`` (a model
    already in memory); the eval closes the generator when it ends, as it does one it built, so pass a
    fresh one per call. ``agent.policy`` is still what the report names.
    """
    _check_decoding(config)
    out = Path(out)
    tasks = load_eval_tasks(config, data_file)
    _prepare_out(out, config)
    path = out / TRAJECTORIES
    done = {_key(r["benchmark"], r["task_id"], r["sample"]) for r in read_records(path, repair=True)}
    wanted = [(b, t, s) for b, ts in tasks.items() for t in ts for s in range(config.eval.samples)]
    pending = [item for item in wanted if _key(item[0], item[1].id, item[2]) not in done]
    if on_start is not None:
        on_start(len(pending), len(wanted))
    logger.info("eval: %d rollouts to run, %d already done", len(pending), len(wanted) - len(pending))
    ran = asyncio.run(_run_pending(config, pending, path, on_record, policy)) if pending else 0
    keys = {_key(b, t.id, s) for b, t, s in wanted}
    records = list({
        key: r for r in reversed(read_records(path)) if (key := _key(r["benchmark"], r["task_id"], r["sample"])) in keys
    }.values())[::-1]
    metrics = write_reports(out, records, config, order=list(tasks), baselines=world_baselines(config, tasks, records))
    return EvalResult(out=out, ran=ran, total=len(wanted), metrics=metrics)
