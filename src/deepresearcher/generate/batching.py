"""The request queue of in-process generators: concurrent ``generate`` calls become one batch.

An agent loop runs every rollout of a step as its own coroutine, each asking for one turn at a time.
An in-process engine is fastest when it samples those turns together, so a ``BatchingGenerator``
parks each request, lets the event loop run until no new request arrives for a few yields (the other
rollouts finishing their tool calls), and hands the whole batch to ``_sample``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from deepresearcher.generate.base import GenerationResult, SamplingParams


@dataclass
class Request:
    """One parked ``generate`` call."""

    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future[GenerationResult]


class BatchingGenerator:
    """Base of the in-process generators; subclasses implement ``_sample`` (one batch, synchronously)."""

    exact_tokens = True

    def __init__(self, *, max_batch: int = 256, settle_yields: int = 3) -> None:
        self.max_batch = max_batch
        self.settle_yields = settle_yields
        self._queue: list[Request] = []
        self._worker: asyncio.Task[None] | None = None

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        future: asyncio.Future[GenerationResult] = asyncio.get_running_loop().create_future()
        self._queue.append(Request(list(prompt_ids), params, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.ensure_future(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._queue:
            # Let the other rollouts of this round finish their tool calls and queue up first.
            seen, stable = -1, 0
            while stable < self.settle_yields:
                await asyncio.sleep(0)
                stable = stable + 1 if len(self._queue) == seen else 0
                seen = len(self._queue)
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            try:
                results = self._sample(batch)
            except Exception as exc:  # a model failure fails every waiting rollout, never hangs them
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(exc)
                continue
            for request, result in zip(batch, results, strict=True):
                if not request.future.done():
                    request.future.set_result(result)

    def _sample(self, batch: list[Request]) -> list[GenerationResult]:
        raise NotImplementedError

    async def aclose(self) -> None:
        if self._worker is not None:
            await asyncio.gather(self._worker, return_exceptions=True)
