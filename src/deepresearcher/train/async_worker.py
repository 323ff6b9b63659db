"""Our agent loop as the rollout worker of TRL's ``AsyncGRPOTrainer``, and the weight transfer that feeds it.

``AgentRolloutWorker`` implements TRL's ``RolloutWorkerProtocol`` in this process: a thread runs an event
loop that keeps ``inflight_groups`` groups of episodes going against the real tools (the agent's rollout
engine, as the synchronous trainer's ``Rollouts.collect``), sampled by a local engine over **its own copy**
of the policy, so decoding goes on while the trainer runs forward and backward passes. When a group's
last episode ends it is scored (``reward.score_rollout`` through the run's scorer), its advantages are
computed as TRL's own worker computes them (``(r - mean) / (std + 1e-8)`` within the group) and each episode
goes on the queue as a ``RolloutSample``: prompt and completion ids, the env mask (0 on tool output), the
sampling log-probabilities (the old log-probabilities of the trainer's importance ratio) and the policy
version the group **started** with (its oldest weights: in-flight episodes keep running across a weight
sync, so a group may finish under newer ones; the tag never understates its staleness). With ``train.agent`` a
group's episodes are runs of that program against the engine behind the policy endpoint (``endpoint.programs``),
each trained on what the endpoint recorded it sampling, as the synchronous trainer trains them.

``EngineWeightTransfer`` implements ``WeightTransferProtocol`` in this process: ``pause`` takes the
engine's weights lock (the decode thread stops between two forward passes, its rows keep their place),
``send_weights`` copies each tensor TRL streams into the engine's model, ``resume`` releases it. That is
what TRL's NCCL transfer does to a vLLM server, and after it the engine's logits are the trainer's.

The queue records, at the moment the trainer takes each sample, how many versions old it is
(``staleness_histogram``): TRL's drop rule compares the same two versions at the same moment.

On a GPU (``train.use_vllm``) the worker samples from a vLLM server instead (``VLLMServerGenerator``: token ids
and logprobs over HTTP) and TRL's own NCCL ``WeightTransferClient`` loads the weights into that server;
``bench/gpu_check.sh`` prepares that run.
"""

from __future__ import annotations

import asyncio
import logging
import math
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import Config
from deepresearcher.errors import ConfigError

if TYPE_CHECKING:
    from deepresearcher.train.grpo import Scorer

logger = logging.getLogger(__name__)


class StalenessQueue(queue.Queue):
    """The rollout queue; counts how stale each sample is when the trainer takes it (``version() - its tag``)."""

    def __init__(self, version: Callable[[], int]) -> None:
        super().__init__()
        self._version = version
        self._taken: Counter[int] = Counter()
        self._lock = threading.Lock()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        sample = super().get(block, timeout)
        with self._lock:
            self._taken[self._version() - sample.model_version] += 1
        return sample

    def take_histogram(self) -> dict[int, int]:
        """Staleness -> samples taken since the last call (dropped ones included: those above max_staleness)."""
        with self._lock:
            taken, self._taken = self._taken, Counter()
        return dict(sorted(taken.items()))


def prompt_stream(tasks: list[dict[str, Any]], seed: int, index: int) -> dict[str, Any]:
    """The ``index``-th prompt of the run: epochs over ``tasks``, each in its own seeded order, so a resumed
    run that starts at ``index`` continues the stream the interrupted one was drawing from."""
    epoch, position = divmod(index, len(tasks))
    order = list(range(len(tasks)))
    random.Random(f"{seed}/epoch/{epoch}").shuffle(order)
    return tasks[order[position]]


def group_samples(trajectories: list[Trajectory], scores: list[dict[str, float]], group_id: int,
                  model_version: int, eos_id: int, drop_zero_signal: bool = False) -> list[Any]:
    """One group's episodes as TRL ``RolloutSample``s, with group-relative advantages and per-sample metrics
    (reward, F1, ... as metrics.jsonl names them; TRL's collator averages them over the samples it trains).

    ``drop_zero_signal`` (``train.drop_zero_signal_groups``): a group whose rewards are all equal keeps its
    samples, and their metrics, with an all-zero completion mask, as the synchronous trainer sends them."""
    import numpy as np
    from trl.experimental.async_grpo.async_rollout_worker import RolloutSample

    from deepresearcher.train.grpo import summarize

    rewards = np.array([s["reward"] for s in scores], dtype=float)
    advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-8)  # TRL's AsyncRolloutWorker, to the epsilon
    zero_signal = float(np.all(rewards == rewards[0]))
    now = time.time()
    samples = []
    for t, s, advantage in zip(trajectories, scores, advantages, strict=True):
        completion, mask, logprobs = t.completion_ids, t.completion_mask, t.completion_logprobs
        if not completion:  # said nothing: one masked EOS, as the synchronous trainer sends
            completion, mask, logprobs = [eos_id], [0], [0.0]
        if drop_zero_signal and zero_signal:
            mask = [0] * len(completion)
        if any(m and (lp is None or math.isnan(lp)) for m, lp in zip(mask, logprobs, strict=True)):
            raise ConfigError("asynchronous GRPO needs the sampling log-probability of every trained token, and "
                              "this protocol re-renders turns (agent.protocol: deepresearcher); use the native "
                              "protocol or set train.async_grpo.enabled=false.")
        metrics = {k: v for k, v in summarize([t], [s], 1).items() if k not in ("rollouts", "zero_signal_share")}
        metrics["zero_signal_share"] = zero_signal
        samples.append(RolloutSample(
            prompt=[], completion=[],
            input_ids=np.array(list(t.prompt_ids) + list(completion), dtype=np.int64),
            completion_mask=np.array([0] * len(t.prompt_ids) + list(mask), dtype=np.int64),
            old_log_probs=np.array([0.0] * len(t.prompt_ids) + [0.0 if lp is None else lp for lp in logprobs],
                                   dtype=np.float32),
            advantage=float(advantage), model_version=model_version, group_id=group_id, metrics=metrics,
            enqueued_at=now,
        ))
    return samples


class AgentRolloutWorker:
    """TRL's ``RolloutWorkerProtocol`` over our agent loop, in a thread of this process (module docstring)."""

    def __init__(self, config: Config, rollouts: Any, tasks: list[dict[str, Any]], engine: Any,
                 tokenizer: Any, scorer: Scorer, *, inflight_groups: int, start_index: int = 0) -> None:
        if not tasks:
            raise ConfigError("asynchronous GRPO has no prompts to train on; check train.data.")
        self.config = config
        self.rollouts = rollouts  # its own Rollouts (``Rollouts.sibling``): its loop runs on the worker's thread
        self.tasks = tasks
        self.tokenizer = tokenizer
        self.scorer = scorer
        self.group_size = config.train.group_size
        self.inflight_groups = inflight_groups
        self.start_index = start_index
        self.model_version = 0
        self.rollout_buffer = StalenessQueue(lambda: self.model_version)
        self.metrics_queue: queue.Queue = queue.Queue()
        self.engine = engine  # a LocalEngine over its own model copy, or a vLLM server's generator (GPU)
        self.groups_done = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._main: asyncio.Task | None = None

    # --- RolloutWorkerProtocol ---------------------------------------------------------------------

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="dr-async-rollouts", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        loop = self.rollouts.loop
        if self._main is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._main.cancel)
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def update_model_version(self, model_version: int) -> None:
        self.model_version = model_version

    def check_health(self, stale_after_s: float) -> None:
        if self._error is not None:
            raise RuntimeError(f"the rollout worker failed: {self._error!r}") from self._error
        if self._thread is None or not self._thread.is_alive():
            raise RuntimeError("the rollout worker is not running")

    # --- the worker's thread -----------------------------------------------------------------------

    def _run(self) -> None:
        loop = self.rollouts.loop
        asyncio.set_event_loop(loop)
        self._main = loop.create_task(self._produce())
        try:
            loop.run_until_complete(self._main)
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # noqa: BLE001 - raised on the trainer's thread by check_health
            logger.exception("rollout worker failed")
            self._error = exc
        finally:
            loop.run_until_complete(self.engine.aclose())

    async def _produce(self) -> None:
        """Groups until stopped: of our agent loop, or (``train.agent``) of the program behind the policy endpoint,
        served on this loop as the synchronous trainer serves it (``endpoint.programs``)."""
        program = self.config.train.agent
        if program is None:
            from deepresearcher.agent.loop import run_episodes
            from deepresearcher.agent.session import AgentSession

            session = AgentSession(self.config, self.engine, self.tokenizer, self.rollouts.toolboxes, decoding="train")
            engines = [session.engine(toolbox=toolbox) for toolbox in self.rollouts.toolboxes]
            await self._stream(lambda task: run_episodes(engines[task.get("world", 0)], [task] * self.group_size))
            return
        from deepresearcher.endpoint.programs import ProgramEpisodes, program_tasks
        from deepresearcher.endpoint.server import endpoint_for

        endpoint = endpoint_for(self.config, self.engine, self.tokenizer, model_name="policy", training=True,
                                layout=program.layout, turn_limit=True)
        async with ProgramEpisodes(program, endpoint) as episodes:
            await self._stream(lambda task: asyncio.gather(*(
                episodes.run(t) for t in program_tasks([task] * self.group_size, self.rollouts.toolboxes))))

    async def _stream(self, episodes_of: Callable[[dict[str, Any]], Awaitable[list[Trajectory]]]) -> None:
        slots = asyncio.Semaphore(self.inflight_groups)
        running: set[asyncio.Task] = set()
        group_id = 0
        try:
            while not self._stop.is_set():
                await slots.acquire()
                task = prompt_stream(self.tasks, self.config.train.seed, self.start_index + group_id)
                job = asyncio.ensure_future(self._group(episodes_of, task, group_id))
                running.add(job)
                job.add_done_callback(lambda done: (running.discard(done), slots.release()))
                job.add_done_callback(self._raise_failure)
                group_id += 1
        finally:
            for job in running:
                job.cancel()
            await asyncio.gather(*running, return_exceptions=True)

    def _raise_failure(self, job: asyncio.Task) -> None:
        if not job.cancelled() and job.exception() is not None and self._main is not None:
            self._error = job.exception()
            self._main.cancel()

    async def _group(self, episodes_of: Callable[[dict[str, Any]], Awaitable[list[Trajectory]]],
                     task: dict[str, Any], group_id: int) -> None:
        version = self.model_version
        trajectories = list(await episodes_of(task))
        # off the worker's loop: a judge reward waits on its judge while the other groups keep running
        scores = await asyncio.to_thread(self.scorer, trajectories, [task] * len(trajectories))
        for sample in group_samples(trajectories, scores, group_id, version, self.tokenizer.eos_token_id,
                                    self.config.train.drop_zero_signal_groups):
            self.rollout_buffer.put_nowait(sample)
        self.groups_done += 1


class EngineWeightTransfer:
    """TRL's ``WeightTransferProtocol`` into a local engine's own model (module docstring)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.params = dict(engine.model.named_parameters())
        self.syncs = 0

    def init_weight_transfer(self) -> None:
        """Nothing to set up: the engine's model lives in this process."""

    def pause(self) -> None:
        self.engine.weights_lock.acquire()

    def send_weights(self, iterator: Iterator[tuple[str, Any]]) -> None:
        import torch

        with torch.no_grad():
            for name, tensor in iterator:
                if name not in self.params:
                    raise RuntimeError(f"the trainer sent weight {name!r}, which the rollout engine's model lacks; "
                                       "the two must be the same architecture")
                self.params[name].copy_(tensor)
        self.syncs += 1

    def resume(self) -> None:
        self.engine.weights_lock.release()

    def destroy(self) -> None:
        """Nothing to release."""
