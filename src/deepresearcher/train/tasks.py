"""Which tasks a training run uses, and which environment answers each: tasks from sources (``train.data``).

``quickstart``, ``sft`` and ``train`` (and the verl loop, through :func:`training_tasks`) all draw their
tasks here, so the SFT tasks, the GRPO prompts and the held-out tasks never overlap and are the same
whichever command runs a stage.

Sources are the synthetic world (one world, or several that share names but not facts), benchmarks by
name, and question files (DeepResearcher's verl parquet, a ``data mix`` output, a JSONL of
``{question, golds}``, saved trajectories). Each task dict carries ``world``: the index of the
environment that answers its tool calls in :attr:`TaskSets.environments`, a world's directory (its own
index) or ``None`` for the configured search backend (``search``/``browse``: live, the offline
``eval-corpus`` index, any ``index build`` corpus).
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from deepresearcher.config import Config, DataSource
from deepresearcher.errors import ConfigError, DataError
from deepresearcher.train.stratify import balanced_cycle, balanced_split, per_type_quota, short_types, stratify

logger = logging.getLogger(__name__)

T = TypeVar("T")


def held_out_seed(config: Config) -> int:
    """The seed of the held-out world of ``train.eval_world``: the dev world right after the training
    worlds, the test world after it. Recipes are chosen on dev; the reported figures come from test."""
    return config.world.seed + config.train.num_worlds + (config.train.eval_world == "test")


def _shared_names_world(config: Config, seed: int) -> Path:
    """The world of ``seed`` drawing names from the run's one pool (``world.names_seed``, else ``world.seed``)."""
    from deepresearcher.web.local_world import ensure_world

    names_seed = config.world.names_seed if config.world.names_seed is not None else config.world.seed
    return ensure_world(config.model_copy(update={"world": config.world.model_copy(
        update={"seed": seed, "names_seed": names_seed, "dir": None})}))


def pooled_world_seeds(config: Config, count: int) -> list[int]:
    """Seeds of the further unseen worlds pooled into a stratified held-out set: every other seed after the
    held-out world's, so the dev world's pool (+2, +4, ...) and the test world's never share a world and
    neither is ever a training world."""
    return [held_out_seed(config) + 2 * k for k in range(1, count + 1)]


def ensure_training_worlds(config: Config) -> tuple[list[Path], Path | None]:
    """The training worlds' directories and the held-out world's (None with ``train.num_worlds`` 1).

    With several worlds, world i has seed ``world.seed + i`` and every world (the held-out one,
    ``held_out_seed``, included) draws names from one pool, so only copying generalizes.
    """
    from deepresearcher.web.local_world import ensure_world

    n = config.train.num_worlds
    if n == 1:
        return [ensure_world(config)], None
    dirs = [_shared_names_world(config, seed)
            for seed in [*range(config.world.seed, config.world.seed + n), held_out_seed(config)]]
    return dirs[:n], dirs[n]


@dataclass
class TaskSets:
    """The tasks of one run; each task dict carries ``world``, the index of its environment in ``environments``."""

    world_dirs: list[Path]  # the training worlds, then the held-out world when there is one, then the pooled ones
    held_out_dir: Path | None
    sft: list[dict[str, Any]]  # world tasks for the oracle's demonstrations (SFT warm start)
    grpo: list[dict[str, Any]]  # RL prompts: the sources mixed by ratio, minus the SFT tasks
    test: list[dict[str, Any]]  # held-out evaluation, at most ``train.eval_tasks``
    uses_search: bool = False  # some task is answered by the configured search backend
    pooled_dirs: list[Path] = field(default_factory=list)  # unseen worlds after the held-out one, for a stratified test set

    @property
    def environments(self) -> list[Path | None]:
        """One entry per environment index: the worlds' directories, then ``None`` (the search backend) if used."""
        return [*self.world_dirs, *([None] if self.uses_search else [])]


def eval_sources(config: Config) -> list[DataSource]:
    """``train.eval_data``, or by default the world's held-out tasks when training on the world (else none)."""
    cfg = config.train
    if cfg.eval_data is not None:
        return cfg.eval_data
    world = next((s for s in cfg.data if s.kind == "world"), None)
    return [] if world is None else [DataSource(kind="world", environment=world.environment)]


def check_environments(config: Config, sources: list[DataSource]) -> None:
    """Refuse a run whose questions would be researched in the wrong environment, saying what to set.

    World and other sources share a run only when each says which environment serves it; real questions
    need a real environment (the default local backend searches the synthetic world).
    """
    kinds = {s.kind == "world" for s in sources}
    if len(kinds) == 2 and any(s.environment is None for s in sources):
        unset = ", ".join(s.label for s in sources if s.environment is None)
        raise ConfigError(
            "train.data/eval_data mix synthetic-world tasks with other questions, so each source must say which "
            f"environment serves it: set `environment: world` (the world's own index) or `environment: search` "
            f"(the search section's backend) on {unset}."
        )
    real = [s.label for s in sources if s.serves == "search"]
    if real and config.search.backend == "local" and config.search.index is None and not config.env.server_urls:
        raise ConfigError(
            f"{', '.join(real)}: real questions need a real environment, but search.backend is `local` with no "
            "search.index, which searches the synthetic world. Set search.backend (serper, searxng, brave, ddgs) "
            "for the live web, or search.index to an offline corpus index (`deepresearcher eval-corpus --out "
            "corpora/eval` gives corpora/eval/index; `deepresearcher index build` indexes your own)."
        )


def _load_source(source: DataSource, split: str, data_dir: Path | None) -> list[Any]:
    """The ``QATask`` questions of a benchmark or file source."""
    from deepresearcher.data import load_benchmark, load_file

    if source.kind == "benchmark":
        assert source.name is not None  # checked by DataSource
        return load_benchmark(source.name, split, path=source.path, limit=source.limit, data_dir=data_dir)
    assert source.path is not None
    return load_file(source.path, source=source.path.stem, split=source.split or "", limit=source.limit)


def question_task(task: Any, env: int) -> dict[str, Any]:
    """A ``QATask`` (benchmark, file) as the task dict the trainer keys by id, answered by environment ``env``."""
    return {"id": task.id, "question": task.question, "golds": list(task.golds),
            "answerable": task.metadata.get("answerable"), "type": task.source, "source": task.source, "world": env}


def mix_by_ratio(pools: list[list[T]], ratios: list[float], seed: int) -> list[T]:
    """The largest mix the (already shuffled) pools fill at exactly ``ratios``, shuffled with ``seed``.

    One pool is taken whole and left in its order. Counts follow ``data.mix.allocate`` (largest remainder).
    """
    from deepresearcher.data import allocate

    if len(pools) == 1:
        return list(pools[0])
    weight = sum(ratios)
    total = min(math.floor(len(pool) * weight / r + 1e-9) for pool, r in zip(pools, ratios, strict=True))
    counts = allocate(total, {f"{i:04d}": r for i, r in enumerate(ratios)})
    mixed = [item for i, pool in enumerate(pools) for item in pool[: counts[f"{i:04d}"]]]
    random.Random(seed).shuffle(mixed)
    return mixed


class _Builder:
    """Loads the sources of one run into task dicts, each routed to its environment's index."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.sources = [*config.train.data, *eval_sources(config)]
        check_environments(config, self.sources)
        uses_world = any(s.kind == "world" or s.serves == "world" for s in self.sources)
        self.train_dirs, self.held_out = ensure_training_worlds(config) if uses_world else ([], None)
        self.pooled = self._pool_held_out_worlds()
        self.world_dirs = self.train_dirs if self.held_out is None else [*self.train_dirs, self.held_out, *self.pooled]
        self.search_env = len(self.world_dirs)
        self.uses_search = any(s.serves == "search" for s in self.sources)

    def quota(self) -> int:
        """Tasks of each type in a stratified world held-out set (``train.eval_per_type``, 0: not stratified)."""
        from deepresearcher.world.tasks import TASK_TYPES

        cfg = self.config.train
        return per_type_quota(cfg.eval_per_type, cfg.eval_tasks, len(TASK_TYPES)) if cfg.eval_per_type else 0

    def _pool_held_out_worlds(self) -> list[Path]:
        """Further unseen worlds (``pooled_world_seeds``) until every task type of the held-out world has
        ``quota()`` held-out tasks, at most ``MAX_POOLED_WORLDS`` of them."""
        from deepresearcher.world import load_tasks

        source = next((s for s in eval_sources(self.config) if s.kind == "world"), None)
        quota = self.quota()
        if source is None or self.held_out is None or not quota:
            return []
        splits = _held_out_splits(source)
        tasks = [t.to_dict() for split in splits for t in load_tasks(self.held_out, split)]
        types = sorted({t["type"] for t in tasks})
        pooled: list[Path] = []
        for seed in pooled_world_seeds(self.config, MAX_POOLED_WORLDS):
            if not short_types(tasks, quota, types):
                break
            pooled.append(_shared_names_world(self.config, seed))
            tasks += [t.to_dict() for split in splits for t in load_tasks(pooled[-1], split)]
        return pooled

    def env(self, source: DataSource, world: int = 0) -> int:
        return world if source.serves == "world" else self.search_env

    def world_train(self, source: DataSource) -> list[dict[str, Any]]:
        from deepresearcher.train.rollout import task_dict
        from deepresearcher.world import load_tasks

        split = source.split or self.config.train.split
        tasks = [{**task_dict(t), "world": self.env(source, w)}
                 for w, d in enumerate(self.train_dirs) for t in load_tasks(d, split)]
        return tasks[: source.limit]

    def world_test(self, source: DataSource) -> list[dict[str, Any]]:
        from deepresearcher.train.rollout import task_dict
        from deepresearcher.world import load_tasks

        if self.held_out is None:
            tasks = [{**task_dict(t), "world": self.env(source)} for t in load_tasks(self.train_dirs[0], source.split or self.config.train.eval_world)]
        else:  # the held-out world's facts were never trained on: every split of it is held out (pooled ones too)
            tasks = [{**task_dict(t), "world": self.env(source, len(self.train_dirs) + k)}
                     for k, world in enumerate([self.held_out, *self.pooled])
                     for split in _held_out_splits(source) for t in load_tasks(world, split)]
        return tasks[: source.limit]

    def questions(self, source: DataSource, default_split: str) -> list[dict[str, Any]]:
        env = self.env(source)
        tasks = [question_task(t, env) for t in _load_source(source, source.split or default_split, self.config.eval.data_dir)]
        if not tasks:
            raise DataError(f"data source {source.label} has no questions; check its split, path and limit.")
        return tasks


# Unseen worlds pooled at most into a stratified held-out set (a small world has ~35 unanswerable tasks).
MAX_POOLED_WORLDS = 8


def _held_out_splits(source: DataSource) -> tuple[str, ...]:
    """The splits of an unseen world a held-out source reads: its own split, else all of them."""
    return (source.split,) if source.split else ("train", "dev", "test")


def _drop_repeats(pools: list[list[dict[str, Any]]], banned: set[str]) -> list[list[dict[str, Any]]]:
    """Drop questions already kept by an earlier pool or held out for evaluation (normalized text)."""
    from deepresearcher.data import question_key

    seen = set(banned)
    out = []
    for pool in pools:
        kept = []
        for task in pool:
            key = question_key(task["question"])
            if key not in seen:
                seen.add(key)
                kept.append(task)
        if len(kept) < len(pool):
            logger.info("dropped %d repeated or held-out questions", len(pool) - len(kept))
        out.append(kept)
    return out


def _unique_ids(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tasks with ids made unique (``id#2``, ...): the trainer keys prompts by id, and two files may both
    number their rows ``<stem>_0, <stem>_1, ...``. World tasks' ids are unique already and stay as they are."""
    seen: dict[str, int] = {}
    out = []
    for task in tasks:
        count = seen[task["id"]] = seen.get(task["id"], 0) + 1
        out.append(task if count == 1 else {**task, "id": f"{task['id']}#{count}"})
    return out


def task_sets(config: Config) -> TaskSets:
    """Load, shuffle (seeded by ``train.seed``) and split the run's sources into SFT, GRPO and test tasks.

    World source: its tasks of every training world (split ``train.split``) are shuffled; the first
    ``train.sft.num_tasks`` are the oracle's SFT tasks (``train.sft.task_mix: balanced``: as many of each
    type, ``balanced_split``) and the rest GRPO prompts (``train.prompt_types`` of them, ordered by
    ``train.prompt_mix``). Other sources: their
    questions, minus repeats and held-out questions, each shuffled with its own seed. Several sources are
    mixed at their ratios (:func:`mix_by_ratio`). Test tasks: ``train.eval_data`` (default: the world's
    ``train.eval_world`` split, or every split of the held-out dev or test world with several worlds), at most ``train.eval_tasks``.
    World test tasks are stratified (``train.eval_per_type`` of each type, ``stratify``), with several worlds
    pooled from further unseen worlds (``pooled_world_seeds``) where the held-out world has too few of a type.
    """
    from deepresearcher.data import question_key

    cfg = config.train
    build = _Builder(config)
    tests: list[list[dict[str, Any]]] = []
    test_sources = eval_sources(config)
    for source in test_sources:
        tests.append(build.world_test(source) if source.kind == "world" else build.questions(source, "dev"))
    for i, (source, pool) in enumerate(zip(test_sources, tests, strict=True)):
        random.Random(cfg.seed + 1 if len(tests) == 1 else f"{cfg.seed + 1}:{i}").shuffle(pool)
        if source.kind == "world" and build.quota():
            types = sorted({t["type"] for t in pool})
            pool[:] = stratify(pool, build.quota())
            if short := short_types(pool, build.quota(), types):
                logger.warning("stratified held-out set: fewer than %d tasks of %s (in %d held-out world(s))",
                               build.quota(), ", ".join(f"{k} ({v})" for k, v in short.items()),
                               1 + len(build.pooled) if build.held_out else 1)
    test = _unique_ids(mix_by_ratio(tests, [s.ratio for s in test_sources], cfg.seed + 1)[: cfg.eval_tasks] if tests else [])

    worlds = [s for s in cfg.data if s.kind == "world"]
    if len(worlds) > 1:
        raise ConfigError("train.data lists the world more than once; give one world source (train.num_worlds "
                          "trains on several shared-name worlds).")
    pools: list[list[dict[str, Any]]] = []
    ratios: list[float] = []
    sft: list[dict[str, Any]] = []
    if worlds:
        train = build.world_train(worlds[0])
        random.Random(cfg.seed).shuffle(train)
        if cfg.sft.task_mix == "balanced":
            sft, rest = balanced_split(train, cfg.sft.num_tasks)
        else:
            sft, rest = train[: cfg.sft.num_tasks], train[cfg.sft.num_tasks :]
        rest = rest or train
        if cfg.prompt_types:
            rest = [t for t in rest if t["type"] in cfg.prompt_types]
            if not rest:
                raise DataError(f"train.prompt_types={cfg.prompt_types}: the training worlds hold no such task "
                                "outside the SFT tasks; name other types or lower train.sft.num_tasks.")
        if cfg.prompt_mix == "balanced":
            rest = balanced_cycle(rest)
        pools.append(rest)
        ratios.append(worlds[0].ratio)
    others = [s for s in cfg.data if s.kind != "world"]
    real = _drop_repeats([build.questions(s, "train") for s in others], {question_key(t["question"]) for t in test})
    for i, (source, pool) in enumerate(zip(others, real, strict=True)):
        if not pool:
            raise DataError(f"data source {source.label}: every question repeats an earlier source's or a held-out "
                            "one (train.eval_data); train on other questions or drop the repeated source.")
        random.Random(f"{cfg.seed}:{i}:{source.label}").shuffle(pool)
        pools.append(pool)
        ratios.append(source.ratio)
    grpo = _unique_ids(mix_by_ratio(pools, ratios, cfg.seed))
    return TaskSets(build.world_dirs, build.held_out, sft, grpo, test, build.uses_search, build.pooled)


def training_tasks(config: Config) -> list[dict[str, Any]]:
    """The run's RL prompts as task dicts (``id``, ``question``, ``answers``, ``answerable``, ``world``; ``source``
    for real questions): what GRPO trains on, and what the verl loop writes as its parquet."""
    return task_sets(config).grpo
