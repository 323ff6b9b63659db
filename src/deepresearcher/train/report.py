"""``report.html`` of a training run: notes, tables, settings, learning curves and trajectories.

The page is the one every report uses (``deepresearcher.reports.ReportPage``), so a run's episodes are
browsed in the same trajectory viewer as an eval's. It is built from the run directory (config.yaml,
metrics.jsonl, the first and last step's ``samples/``) plus what the caller passes: tables, notes and
held-out episodes (``trajectory_record``). It can be regenerated at any time, also for a run that was
stopped, with ``write_report(RunDir(path))``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.reports import ReportPage, Table
from deepresearcher.train.run_dir import RunDir, read_metrics

__all__ = ["CURVES", "collapse_warnings", "heldout_tables", "plot_curves", "run_settings", "sample_records", "trajectory_record", "write_report"]

# metric key in metrics.jsonl -> plot title
CURVES: dict[str, str] = {
    "reward": "Reward (mean over rollouts)",
    "f1": "Answer F1",
    "format_error_rate": "Share of rollouts with a format error",
    "tool_calls": "Tool calls per episode",
    "response_tokens": "Policy tokens per episode",
    "kl": "KL to reference",
    "entropy": "Policy entropy (nats/token)",
    "zero_signal_share": "Share of groups with equal rewards",
}


def plot_curves(run: RunDir) -> list[Path]:
    """One PNG per metric that the run logged, plus ``learning_curve.png`` (reward and F1 together)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = read_metrics(run.metrics_path)
    written: list[Path] = []
    for key, title in CURVES.items():
        points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
        if not points:
            continue
        fig, ax = plt.subplots(figsize=(5, 3.2))
        ax.plot(*zip(*points), marker=".")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = run.root / f"curve_{key}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    steps = [r["step"] for r in records if r.get("reward") is not None]
    if steps:
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for key in ("reward", "f1"):
            ax.plot(steps, [r.get(key) for r in records if r.get("reward") is not None], label=key, marker=".")
        ax.set_title("Learning curve (GRPO rollouts)")
        ax.set_xlabel("step")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = run.root / "learning_curve.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def trajectory_record(trajectory: Trajectory, group: str, **scores: Any) -> dict[str, Any]:
    """One episode as the trajectory viewer reads it; ``scores`` (f1, em, reward, ...) override its metadata's."""
    scores = {**trajectory.metadata, **scores}
    return {
        "group": group, "task_id": trajectory.task_id, "question": trajectory.question, "golds": trajectory.golds,
        "answer": trajectory.answer, "termination": trajectory.termination,
        **{key: scores.get(key) for key in ("reward", "f1", "em")},
        "format_ok": None if scores.get("format_error") is None else not scores["format_error"],
        "behaviour": scores.get("behaviour"),
        "trajectory": trajectory.model_dump(mode="json", exclude={"segments"}),
    }


def sample_records(run: RunDir, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` sampled episodes of the first and of the last step that wrote ``samples/``."""
    files = sorted(run.samples_dir.glob("step_*.jsonl")) if run.samples_dir.exists() else []
    records = []
    for path in dict.fromkeys(files[:1] + files[-1:]):
        step = int(path.stem.split("_")[1])
        for line in path.read_text(encoding="utf-8").splitlines()[:limit]:
            records.append(trajectory_record(Trajectory.model_validate(json.loads(line)), f"GRPO samples, step {step}"))
    return records


def run_settings(run: RunDir) -> list[str]:
    """The settings behind the run's numbers, one line each, from its ``config.yaml``."""
    path = run.root / "config.yaml"
    if not path.is_file():
        return []
    config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    train, world, agent = config.get("train", {}), config.get("world", {}), config.get("agent", {})
    return [
        f"model: `{train.get('model') or 'tiny Qwen2 from scratch (train.tiny_model)'}`; world: {world.get('size')} "
        f"(seed {world.get('seed')}), {train.get('num_worlds', 1)} training world(s)",
        f"GRPO: {train.get('max_steps')} steps of {train.get('prompts_per_step')} prompts x {train.get('group_size')} "
        f"rollouts; learning rate {train.get('learning_rate')}, KL coefficient {train.get('kl_coef')}",
        f"rollouts: {agent.get('max_turns')} turns, {agent.get('max_tokens_per_turn')} tokens per turn, temperature "
        f"{agent.get('temperature')}; search top-k {config.get('search', {}).get('top_k')}; "
        f"reader `{config.get('browse', {}).get('reader')}`",
    ]


def collapse_warnings(run: RunDir) -> list[str]:
    """The signs of collapse in the run's ``metrics.jsonl`` (``train.collapse`` of its config.yaml), one line each."""
    from deepresearcher.config import CollapseConfig
    from deepresearcher.train.collapse import collapse_signs

    path = run.root / "config.yaml"
    config = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}
    settings = CollapseConfig(**(config.get("train") or {}).get("collapse", {}))
    return [f"Sign of collapse by step {sign.step}: {sign.message}."
            for sign in collapse_signs(read_metrics(run.metrics_path), settings)]


HELDOUT_TABLE = ("Held-out evaluation of the final policy (each figure with its standard error, `_se`: binomial for "
                 "rates, sample SE for means; type_mean: each task type weighs the same, all: each task)")


def heldout_tables(run: RunDir) -> dict[str, list[dict[str, Any]]]:
    """The final policy's held-out figures by task type (``heldout.json``, written by ``train`` with
    ``train.eval_data``) as a report table; none when the run has no such file."""
    path = run.root / "heldout.json"
    if not path.is_file():
        return {}
    from deepresearcher.train.stratify import ALL, TYPE_MEAN

    by_type = json.loads(path.read_text("utf-8"))
    order = sorted(by_type, key=lambda kind: (kind in (TYPE_MEAN, ALL), kind == ALL, kind))  # types, then the two means
    return {HELDOUT_TABLE: [{"type": kind, **by_type[kind]} for kind in order]}


def write_report(
    run: RunDir,
    title: str = "deepresearcher run",
    tables: dict[str, list[dict[str, Any]]] | None = None,
    notes: list[str] | None = None,
    examples: int = 4,
    trajectories: list[dict[str, Any]] | None = None,
) -> Path:
    """Write ``report.html`` (and its PNGs) into the run directory.

    ``tables`` maps a heading to rows (dicts: one column per key); ``examples`` is how many sampled
    episodes of the first and last step to show; ``trajectories`` are more episodes for the viewer,
    e.g. held-out ones (``trajectory_record(trajectory, "after GRPO", **scores)``). Signs of collapse in
    the run's metrics (``collapse_warnings``) head the page in a warning box.
    """
    page = ReportPage(
        title,
        notes=list(notes or []),
        warnings=collapse_warnings(run),
        tables={heading: Table.from_records(rows) for heading, rows in (tables or {}).items()},
        settings=run_settings(run),
        images=[path.name for path in plot_curves(run)],
        records=sample_records(run, examples) + list(trajectories or []),
        group_label="episodes",
    )
    return page.write(run.root / "report.html")
