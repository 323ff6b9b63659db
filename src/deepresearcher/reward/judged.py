"""The verdicts of the judge reward (``reward.metric: judge | f1+judge``): a batch of answers judged at once.

F1 is a pure function of strings; a judge is a model behind a network call. ``RewardJudge`` owns one
``reward.judge.Judge`` (the evaluation's prompts, parsing and attempt bound) and runs it on an event loop of
its own thread, so the synchronous scorer the trainers call (``score_rollout``, from TRL's rollout function,
the asynchronous worker and verl's agent loop) and async callers (``eval``) share one client, whose
connections stay on one loop. ``verdicts`` takes a whole batch: answers recorded in the web cache (kind
``judge``, keyed by judge model, prompt version, question, shown answer, golds and attempt) come back without
a call, so a replay makes none; the rest are asked together, as many in flight as the client allows
(``reward.judge.concurrency`` for a server; the embedded and local clients batch). HTTP failures are retried
by the client (``reward.judge.max_retries``, as ``eval``'s judge); a reply without a verdict is asked again up
to ``reward.judge_attempts`` (temperature-0 prompts once); what is still undecided is a verdict with
``by`` = ``unparsed`` or ``error``, which the reward counts as incorrect, never an exception that stops a batch.

``reward_judge(config)`` is the process's judge for a config: built once per judge setting and reused by every
later call. Given the whole ``Config``, its verdicts are recorded in the run's web cache (``cache.path``,
``cache.mode``; ``replay`` makes zero calls and fails on a miss); given only the ``RewardConfig`` (as
``score_rollout`` is), it takes the judge the run registered, else builds one without a cache.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deepresearcher.config import Config, RewardConfig
from deepresearcher.reward.judge import Judge, Verdict

if TYPE_CHECKING:
    from collections.abc import Coroutine

__all__ = ["JUDGE_METRICS", "JudgeRequest", "RewardJudge", "close_reward_judges", "reward_judge"]

logger = logging.getLogger(__name__)

JUDGE_METRICS = ("judge", "f1+judge")
"""The ``reward.metric`` values whose reward needs a judge's verdict."""


@dataclass(frozen=True)
class JudgeRequest:
    """One answer to judge: the task's question, the answer our format check found, the gold aliases."""

    question: str
    answer: str
    golds: tuple[str, ...]


class RewardJudge:
    """A ``Judge`` on an event loop of its own thread; ``counts`` tallies its verdicts by how they were reached."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self.counts: Counter[str] = Counter()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="reward-judge", daemon=True)
        self._thread.start()

    async def _all(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        verdicts = await asyncio.gather(*(self.judge.judge(r.question, r.answer, list(r.golds)) for r in requests))
        self.counts.update(v.by for v in verdicts)
        return list(verdicts)

    def _submit(self, coroutine: Coroutine[Any, Any, Any]) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def verdicts(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        """The verdicts on ``requests``, in order; blocks this thread (any thread but the judge's own)."""
        return self._submit(self._all(requests)).result() if requests else []

    async def averdicts(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        """``verdicts`` for a caller on another event loop, which keeps running while the judge works."""
        return await asyncio.wrap_future(self._submit(self._all(requests))) if requests else []

    def close(self) -> None:
        """Close the judge's client and cache, then stop its loop and thread."""
        if self._loop.is_closed():
            return
        self._submit(self.judge.aclose()).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


_JUDGES: dict[str, tuple[RewardJudge, Any]] = {}
"""The process's reward judges by judge setting, each with the cache identity it was built with (None: none)."""
_LOCK = threading.Lock()


def _setting(reward: RewardConfig) -> str:
    if reward.judge is None:
        raise ValueError(f"reward.metric={reward.metric} has no judge: set reward.judge (docs/reward.md).")
    setting = [reward.judge.model_dump(mode="json"), reward.judge_prompt, reward.judge_attempts]
    return json.dumps(setting, sort_keys=True)


def _build(reward: RewardConfig, config: Config | None) -> tuple[RewardJudge, Any]:
    from deepresearcher.llm import make_chat_client

    assert reward.judge is not None  # _setting checked it
    cache, identity = None, None
    if config is not None and config.cache.mode != "off":
        from deepresearcher.web.cache import WebCache

        cache = WebCache.from_config(config.cache, config.resolved_cache_dir())
        identity = (str(cache.path), cache.mode)
    judge = Judge(make_chat_client(reward.judge), cache=cache, model_name=reward.judge.model or reward.judge.kind,
                  prompt=reward.judge_prompt, attempts=reward.judge_attempts)
    return RewardJudge(judge), identity


def reward_judge(config: Config | RewardConfig) -> RewardJudge:
    """The process's judge for ``config``'s judge setting (``reward.judge``, ``judge_prompt``, ``judge_attempts``).

    A whole ``Config`` records verdicts in its web cache: call this once where a run starts (eval, a trainer's
    entry point, verl's worker) so the scorer, which sees only the ``RewardConfig``, finds that judge. A
    ``RewardConfig`` alone takes the registered judge, or builds one without a cache (and says so).
    """
    whole = config if isinstance(config, Config) else None
    reward = whole.reward if whole is not None else config
    assert isinstance(reward, RewardConfig)
    key = _setting(reward)
    with _LOCK:
        found = _JUDGES.get(key)
        if found is not None and (whole is None or _cache_identity(whole) == found[1]):
            return found[0]
        if whole is None:
            logger.warning("reward judge %s built without a cache: its verdicts are not recorded; call "
                           "reward.reward_judge(config) with the run's whole config first", reward.judge)
        built = _JUDGES[key] = _build(reward, whole)
    if found is not None:
        found[0].close()
    return built[0]


def _cache_identity(config: Config) -> Any:
    if config.cache.mode == "off":
        return None
    from deepresearcher.web.cache import WebCache

    return (str(WebCache.config_path(config.cache, config.resolved_cache_dir())), config.cache.mode)


@atexit.register
def close_reward_judges() -> None:
    """Close every judge ``reward_judge`` built (their clients, caches and threads); later calls build anew."""
    with _LOCK:
        judges = [judge for judge, _ in _JUDGES.values()]
        _JUDGES.clear()
    for judge in judges:
        judge.close()
