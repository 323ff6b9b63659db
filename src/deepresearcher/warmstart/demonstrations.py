"""SFT demonstrations on any questions: saved trajectories replayed into this model's template.

The scripted oracle can only research the synthetic world (it reads the world's facts), so real
questions need recorded episodes: a JSONL of trajectories as ``deepresearcher research --save`` writes
them, or an eval's ``trajectories.jsonl`` (one scored record per line, the episode under
``trajectory``). Each episode's assistant turns are replayed through the rollout engine and every tool
call is answered with the observation it got when it was recorded, so the demonstration is tokenized
by the model being trained, with its own system turn, and needs no search backend. ``train.sft.min_f1``
keeps only the episodes that answered well (rejection sampling from a stronger model's runs).
"""

from __future__ import annotations

import asyncio
from collections import deque
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from deepresearcher.agent.tools import ToolOutcome
from deepresearcher.agent.trajectory import ToolCallRecord, Trajectory
from deepresearcher.config import Config, DataSource, RewardConfig
from deepresearcher.errors import ConfigError, DataError


def _episode(record: dict[str, Any]) -> dict[str, Any] | None:
    """The trajectory of a saved record: the record itself (``research --save``) or its ``trajectory`` (eval)."""
    if isinstance(record.get("trajectory"), dict):
        return record["trajectory"]
    return record if "turns" in record else None


def holds_trajectories(path: Path) -> bool:
    """Whether the file's first record is a saved trajectory (rather than a question)."""
    from deepresearcher.data import read_records

    first = next(iter(read_records(path)), None)
    return isinstance(first, dict) and _episode(first) is not None


def load_demonstrations(path: Path, limit: int | None = None) -> list[Trajectory]:
    """The saved trajectories of ``path`` (at most ``limit``); a line that is not one is reported by number."""
    from deepresearcher.data import read_records

    out: list[Trajectory] = []
    for row, record in enumerate(read_records(path)):
        episode = _episode(record) if isinstance(record, dict) else None
        if episode is None:
            raise DataError(f"{path} record {row}: not a saved trajectory (no `turns`, no `trajectory`).")
        try:
            out.append(Trajectory.model_validate(episode))
        except ValidationError as exc:
            raise DataError(f"{path} record {row}: not a valid trajectory: {exc.errors()[0]['msg']}") from None
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise DataError(f"{path} holds no trajectories.")
    return out


def demonstration_sources(config: Config) -> list[DataSource]:
    """``train.sft.data`` or else ``train.data``, checked: each is the world (the oracle) or a file of trajectories."""
    sources = config.train.sft.data if config.train.sft.data is not None else config.train.data
    for source in sources:
        if source.kind == "world":
            continue
        if source.kind == "file" and source.path is not None and holds_trajectories(source.path):
            continue
        raise ConfigError(
            f"SFT needs demonstrations, and the scripted oracle exists only for synthetic worlds: {source.label} "
            "holds questions, not trajectories. Pass a JSONL of saved trajectories (`deepresearcher research --save "
            "FILE`, or an eval's trajectories.jsonl) with `deepresearcher sft --data FILE` (train.sft.data), or "
            "train SFT on the world."
        )
    return sources


class RecordedToolBox:
    """Answers a replayed episode's tool calls, in order, with the observations they got when recorded."""

    def __init__(self, calls: list[ToolCallRecord]) -> None:
        self.pending = deque(calls)

    async def call(self, name: str, arguments: dict[str, Any], context: Any) -> ToolOutcome:
        if not self.pending:
            return ToolOutcome(text=f"Error: no recorded observation for this {name} call.", error="not recorded")
        record = self.pending.popleft()
        return ToolOutcome(text=record.text, error=record.error, raw=record.observation)


def good_enough(demos: list[Trajectory], min_f1: float | None, reward: RewardConfig) -> list[Trajectory]:
    """The episodes whose answer scores at least ``min_f1`` (the one scorer's F1 against their golds); all with None.
    Scored as ``reward.metric: f1`` whatever the run rewards: F1 is all this reads, and a judge metric would call
    its judge for nothing."""
    from deepresearcher.reward import score_rollout

    if min_f1 is None:
        return demos
    as_f1 = reward.model_copy(update={"metric": "f1"})
    kept = [d for d in demos if score_rollout(d, d.golds, config=as_f1).metrics["f1"] >= min_f1]
    if not kept:
        raise DataError(f"No saved demonstration answers with F1 >= {min_f1} (train.sft.min_f1); lower it or "
                        "record better episodes.")
    return kept


def replay_demonstrations(config: Config, demos: list[Trajectory], tokenizer: Any) -> list[Trajectory]:
    """Saved episodes as token-level trajectories of ``tokenizer``'s template (SFT data), tools answered from the record."""
    from deepresearcher.train.rollout import replay_turns

    tasks = [{"id": d.task_id, "question": d.question, "golds": d.golds} for d in demos]
    turns = [[turn.text for turn in d.turns] for d in demos]
    toolboxes = [RecordedToolBox([turn.tool_call for turn in d.turns if turn.tool_call is not None]) for d in demos]
    return asyncio.run(replay_turns(config, tasks, turns, toolboxes, tokenizer))
