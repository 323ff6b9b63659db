"""The agent loop verl runs for each sample: our rollout engine, our tools, our reward.

verl's ``AgentLoopWorker`` instantiates the class registered under ``deepresearcher`` once per sample
and awaits ``run(sampling_params, **row)``, where ``row`` is the parquet row (``raw_prompt``,
``reward_model``, ...). What is expensive is built once per worker process and kept in
``_RESOURCES``: our config, the environment (``make_environment``: in process, or the handler fleet at
``env.server_urls``), the toolbox with one tool-concurrency limit for the whole worker, and the chat
template. Per sample only a ``RolloutEngine`` (a few objects) and a ``ServerManagerGenerator`` are made.

Length. verl pads every sample to ``rollout.prompt_length`` + ``rollout.response_length`` tokens. The
episode's context budget is therefore ``len(prompt) + response_length`` (or ``agent.context_budget`` when
smaller), so the engine ends the episode with ``context_budget`` *before* a turn or an observation would
overflow, exactly as it does on a single machine; nothing is ever cut. When ``response_length`` is the
bound that ended the episode, the trajectory says so (``metadata["budget"] == "response_length"``) and the
sample carries ``truncated = 1.0``. A prompt longer than ``prompt_length`` is a configuration error.

What verl receives (``AgentLoopOutput``)::

    prompt_ids        trajectory.prompt_ids          system + user turn + generation prompt
    response_ids      trajectory.completion_ids      policy turns and observations, as sampled / appended
    response_mask     trajectory.completion_mask     1 on sampled tokens, 0 on observations (our loss mask)
    response_logprobs trajectory.completion_logprobs sampling logprobs, 0.0 on observations
    reward_score      score_trajectory(...)["reward"] the same scorer as the TRL path
    num_turns         1 + assistant turns + observations
    extra_fields      what verl's server returned (global_steps, min_global_steps, max_global_steps: the
                      weights versions the episode was sampled with, which verl's v1 trainer reads each
                      step), termination, and reward_extra_info: f1, em, format_error, truncated,
                      tool_calls, searches, browses, dropped (verl's columns and validation metrics)

An episode in flight when the weights change (verl's asynchronous modes) is never scored half-done: verl
resumes its aborted turn (``partial_rollout``; the episode then spans two weights versions, which
``min_global_steps``/``max_global_steps`` record) or, where it does not, the episode is dropped the way
verl marks an aborted sample: an empty response (nothing trained; verl's metrics count it in
``response/aborted_ratio`` and leave it out of the score and length statistics), reward 0 without calling
the scorer, ``termination = "aborted"`` and ``dropped = 1.0``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from deepresearcher.agent.loop import RolloutEngine, RolloutTask, ToolBoxLike
from deepresearcher.agent.template import ChatTemplate
from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import Config, load_config
from deepresearcher.data.formats import question_and_golds
from deepresearcher.errors import ConfigError, DataError
from deepresearcher.integrations.verl.generator import ServerManagerGenerator, TurnAborted
from deepresearcher.reward import JUDGE_METRICS, reward_judge



class _BoundedToolBox:
    """The worker's toolbox behind one semaphore: ``agent.max_concurrent_tools`` holds per worker process,
    although every sample runs its own engine."""

    def __init__(self, toolbox: ToolBoxLike, limit: int) -> None:
        self._toolbox = toolbox
        self._slots = asyncio.Semaphore(limit)

    async def call(self, name: str, arguments: dict[str, Any], context: Any) -> Any:
        async with self._slots:
            return await self._toolbox.call(name, arguments, context)


@dataclass
class _Resources:
    """What one worker process builds once: config, environment, toolbox and template."""

    config: Config
    environment: Any
    toolbox: _BoundedToolBox
    template: ChatTemplate


_RESOURCES: dict[tuple[str, int], _Resources] = {}


def _resources(config_path: str, tokenizer: Any) -> _Resources:
    """This process's resources for ``config_path`` (built on first use; keyed by tokenizer too)."""
    key = (config_path, id(tokenizer))
    if key not in _RESOURCES:
        from deepresearcher.agent.session import make_template, make_toolbox
        from deepresearcher.web import make_environment

        if not Path(config_path).is_file():
            raise ConfigError(f"The deepresearcher config {config_path} is not readable on this node; put the run "
                              "directory (train.runs_dir) on a filesystem every node mounts.")
        config = load_config(config_path)
        if config.reward.metric in JUDGE_METRICS:  # the scorer's judge records its verdicts in the run's cache
            reward_judge(config)
        environment = make_environment(config)
        toolbox = make_toolbox(environment, config)
        _RESOURCES[key] = _Resources(config, environment, _BoundedToolBox(toolbox, config.agent.max_concurrent_tools),
                                     make_template(tokenizer, config))
    return _RESOURCES[key]


async def close_resources() -> None:
    """Close every environment this process opened (tests; verl's workers simply exit)."""
    while _RESOURCES:
        _, resources = _RESOURCES.popitem()
        await resources.environment.aclose()


def task_from_row(row: dict[str, Any]) -> RolloutTask:
    """The question (verbatim) and gold aliases of one verl sample, in any shape its row holds (``data.formats``)."""
    try:
        question, golds = question_and_golds(row)
    except ValueError as exc:
        raise DataError(f"verl sample {row.get('index')!r}: {exc}; write the data with `deepresearcher train "
                        "--engine verl` (data.verl.write_verl_parquet).") from None
    if not question.strip():
        raise DataError(f"verl sample {row.get('index')!r} has an empty user message in `prompt`.")
    extra = row.get("extra_info") or {}
    return RolloutTask(task_id=str(extra.get("index", row.get("index", ""))), question=question,
                       golds=[g for g in golds if g], metadata={"data_source": str(row.get("data_source", ""))})


def episode_budget(prompt_len: int, context_budget: int, prompt_length: int, response_length: int) -> tuple[int, bool]:
    """The episode's token budget under verl's shapes, and whether ``response_length`` is what bounds it."""
    if prompt_len > prompt_length:
        raise ConfigError(f"The prompt has {prompt_len} tokens but verl's rollout.prompt_length is {prompt_length}; "
                          "raise train.verl.max_prompt_length (or use train.compact_prompt).")
    bound = prompt_len + response_length
    return min(context_budget, bound), bound <= context_budget


def to_output(trajectory: Trajectory, scores: dict[str, float], *, generate_seconds: float, tool_seconds: float,
              server_fields: dict[str, Any] | None = None) -> AgentLoopOutput:
    """One finished episode as verl's ``AgentLoopOutput`` (see the module docstring for the mapping);
    ``server_fields``: the ``extra_fields`` verl's server returned for the episode, passed through."""
    calls = [turn.tool_call for turn in trajectory.turns if turn.tool_call is not None]
    observations = sum(1 for s in trajectory.segments if s.source == "env")
    logprobs_known = all(s.logprobs is not None for s in trajectory.segments if s.source == "policy")
    truncated = trajectory.metadata.get("budget") == "response_length" and trajectory.termination == "context_budget"
    return AgentLoopOutput(
        prompt_ids=trajectory.prompt_ids,
        response_ids=trajectory.completion_ids,
        response_mask=trajectory.completion_mask,
        response_logprobs=trajectory.completion_logprobs if logprobs_known else None,
        reward_score=scores["reward"],
        num_turns=1 + len(trajectory.turns) + observations,
        metrics=AgentLoopMetrics(generate_sequences=generate_seconds, tool_calls=tool_seconds),
        extra_fields={
            **(server_fields or {}),
            "termination": trajectory.termination,
            # verl turns these per-sample numbers into columns of the batch and, on validation, into
            # `val-aux/<data_source>/<key>/mean` metrics.
            "reward_extra_info": {
                "f1": scores["f1"],
                "em": scores["em"],
                "format_error": scores["format_error"],
                "truncated": float(truncated),
                "tool_calls": float(len(calls)),
                "searches": float(sum(1 for c in calls if c.name == "web_search")),
                "browses": float(sum(1 for c in calls if c.name == "browse_webpage")),
                "dropped": 0.0,
            },
        },
    )


def dropped_output(prompt_ids: list[int], *, with_logprobs: bool, server_fields: dict[str, Any] | None = None,
                   generate_seconds: float = 0.0) -> AgentLoopOutput:
    """An episode verl aborted and did not resume, as verl marks an aborted sample: the prompt and an empty
    response (no token to train), reward 0 (never scored), the same per-sample fields as a finished one
    (verl stacks them into columns); ``with_logprobs``: whether the batch's other samples carry log-probs."""
    info = dict.fromkeys(["f1", "em", "format_error", "truncated", "tool_calls", "searches", "browses"], 0.0)
    return AgentLoopOutput(
        prompt_ids=prompt_ids, response_ids=[], response_mask=[], response_logprobs=[] if with_logprobs else None,
        reward_score=0.0, num_turns=1, metrics=AgentLoopMetrics(generate_sequences=generate_seconds),
        extra_fields={**(server_fields or {}), "termination": "aborted",
                      "reward_extra_info": {**info, "dropped": 1.0}},
    )


class DeepResearcherAgentLoop(AgentLoopBase):
    """Runs one deepresearcher episode per sample inside verl's agent-loop worker.

    Registered under ``deepresearcher`` by the run's ``agent_loop.yaml`` only (its entry carries
    ``deepresearcher_config``), never by verl's ``@register``: that decorator would run when verl's worker
    first instantiates this class and replace the YAML's entry with one that lacks the config path, so
    every later episode of the worker would fail.
    """

    def __init__(self, *args: Any, deepresearcher_config: str, **kwargs: Any) -> None:
        """``deepresearcher_config``: path of our resolved YAML, set in the agent loop config verl reads."""
        super().__init__(*args, **kwargs)
        self.deepresearcher_config = deepresearcher_config

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        from deepresearcher.agent.session import agent_protocol
        from deepresearcher.reward import is_unanswerable
        from deepresearcher.train.rollout import score_trajectory

        resources = _resources(self.deepresearcher_config, self.tokenizer)
        config = resources.config
        task = task_from_row(kwargs)
        prompt_ids = resources.template.prompt_ids(task.question)
        budget, response_bound = episode_budget(len(prompt_ids), config.agent.context_budget,
                                                self.rollout_config.prompt_length, self.rollout_config.response_length)
        generator = ServerManagerGenerator(self.server_manager, sampling_params)
        engine = RolloutEngine(generator, resources.toolbox, resources.template,
                               config.agent.model_copy(update={"context_budget": budget}))
        started = time.perf_counter()
        try:
            trajectory = await engine.run(task)
        except TurnAborted:
            # Sampled log-probs reach verl only where the trained tokens are the sampled ones (to_output).
            with_logprobs = bool(sampling_params.get("logprobs")) and agent_protocol(config).trains_sampled_tokens
            return dropped_output(prompt_ids, with_logprobs=with_logprobs, server_fields=generator.server_fields,
                                  generate_seconds=time.perf_counter() - started)
        if response_bound:
            trajectory.metadata["budget"] = "response_length"
        # The parquet has no `answerable` column: a task is unanswerable when its golds say "cannot find".
        task_info = {"golds": task.golds, "answerable": not is_unanswerable(task.golds, config.reward.unanswerable_phrases)}
        scores = score_trajectory(trajectory, task_info, config)
        tool_seconds = sum(t.tool_call.seconds for t in trajectory.turns if t.tool_call is not None)
        generate_seconds = sum(t.generate_seconds for t in trajectory.turns)
        return to_output(trajectory, scores, generate_seconds=generate_seconds, tool_seconds=tool_seconds,
                         server_fields=generator.server_fields)
