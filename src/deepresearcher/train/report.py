"""``report.html`` of a run: learning curves as PNGs, evaluation tables, and example trajectories.

Built only from files in the run directory (metrics.jsonl, samples/), so it can be regenerated at any
time, also for a run that was stopped, with ``write_report(RunDir(path))``.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from deepresearcher.train.run_dir import RunDir, read_metrics

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


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "<p>(none)</p>"
    cols = list(rows[0])
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{_fmt(r.get(c))}</td>" for c in cols) + "</tr>" for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return html.escape(str(value))


def _examples(run: RunDir, limit: int) -> str:
    files = sorted(run.samples_dir.glob("step_*.jsonl")) if run.samples_dir.exists() else []
    if not files:
        return "<p>(no sampled trajectories)</p>"
    parts = [f"<p>From {html.escape(files[-1].name)}.</p>"]
    for line in files[-1].read_text(encoding="utf-8").splitlines()[:limit]:
        t = json.loads(line)
        meta = t.get("metadata", {})
        turns = "\n".join(turn.get("text", "") for turn in t.get("turns", []))
        parts.append(
            f"<h4>{html.escape(t.get('question', ''))}</h4>"
            f"<p>gold: {html.escape(' | '.join(t.get('golds', [])))} · answer: {html.escape(str(t.get('answer')))}"
            f" · reward: {_fmt(meta.get('reward'))} · ended: {html.escape(t.get('termination', ''))}</p>"
            f"<pre>{html.escape(turns)}</pre>"
        )
    return "\n".join(parts)


def write_report(
    run: RunDir,
    title: str = "deepresearcher run",
    tables: dict[str, list[dict[str, Any]]] | None = None,
    notes: list[str] | None = None,
    examples: int = 3,
    links: dict[str, str] | None = None,
) -> Path:
    """Write ``report.html`` (and its PNGs) into the run directory; ``tables`` maps a heading to rows,
    ``notes`` are the opening paragraphs and ``links`` maps a label to a page relative to the run."""
    images = plot_curves(run)
    sections = [f"<h1>{html.escape(title)}</h1>"]
    for note in notes or []:
        sections.append(f"<p>{html.escape(note)}</p>")
    if links:
        items = "".join(f'<li><a href="{html.escape(href)}">{html.escape(label)}</a></li>' for label, href in links.items())
        sections.append(f"<ul>{items}</ul>")
    for heading, rows in (tables or {}).items():
        sections.append(f"<h2>{html.escape(heading)}</h2>{_table(rows)}")
    if images:
        sections.append("<h2>Curves</h2>")
        sections.extend(f'<img src="{p.name}" alt="{p.stem}">' for p in images)
    sections.append(f"<h2>Example trajectories</h2>{_examples(run, examples)}")
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}pre{background:#f6f6f6;padding:8px;"
        "white-space:pre-wrap}img{margin:4px}"
    )
    page = f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>" \
        f"<style>{style}</style></head><body>{''.join(sections)}</body></html>"
    path = run.root / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
