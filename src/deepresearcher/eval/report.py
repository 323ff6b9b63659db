"""``metrics.json``, ``report.md`` and ``report.html`` of an eval, from its scored rollouts.

``metrics.json`` holds the settings once (``meta``), the table (``benchmarks`` and ``average`` rows)
and a flat ``results`` list in which every number carries its own metric, benchmark, search backend,
top-k, reader, judge model, date and config hash, so a number copied anywhere stays comparable::

    {"benchmark": "hotpotqa", "metric": "cover_em", "aggregate": "mean@1", "value": 0.12, "n": 50,
     "search_backend": "local", "top_k": 10, "reader": "extractive", "judge_model": null,
     "date": "...", "config_hash": "3f9c1d2ab0e4", ...}

Metrics are fractions in JSON and percentages in the reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from deepresearcher.config import Config
from deepresearcher.eval.aggregate import METRICS, summarize

__all__ = ["baseline_tables", "markdown_table", "metrics_document", "write_reports"]

_LABELS = {"em": "EM", "f1": "F1", "cover_em": "cover-EM", "judge": "judge"}
_META_KEYS = ("search_backend", "search_index", "top_k", "reader", "judge_model", "policy", "date", "config_hash")


def metrics_document(records: list[dict[str, Any]], config: Config, order: list[str] | None = None,
                     date: str | None = None) -> dict[str, Any]:
    """The content of ``metrics.json``."""
    from deepresearcher.eval.runner import report_meta

    meta = report_meta(config, date)
    k = config.eval.samples
    table = summarize(records, k, order)
    results = []
    for name, row in [*table["benchmarks"].items(), ("average", table["average"])]:
        for key, value in row.items():
            if value is None or key in ("questions", "rollouts"):
                continue
            if key in METRICS:
                metric, aggregate = key, f"mean@{k}"
            elif key.startswith("pass@"):
                aggregate, metric = key.split("_", 1)
            else:
                continue
            results.append({"benchmark": name, "metric": metric, "aggregate": aggregate, "value": value,
                            "n": row["questions"], **{m: meta[m] for m in _META_KEYS}})
    return {"meta": meta, **table, "results": results}


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def markdown_table(document: dict[str, Any]) -> str:
    """The report's table: one row per benchmark and the average; pass@k columns when k > 1."""
    k = document["meta"]["samples"]
    columns = [(m, _LABELS[m]) for m in METRICS]
    if k > 1:
        columns += [(f"pass@{k}_{m}", f"pass@{k} {_LABELS[m]}") for m in ("cover_em", "judge")]
    lines = ["| benchmark | n | " + " | ".join(label for _, label in columns) + " | answered | turns |",
             "|---|---:|" + "---:|" * len(columns) + "---:|---:|"]
    rows = [*document["benchmarks"].items(), ("**average**", document["average"])]
    for name, row in rows:
        cells = [_pct(row.get(key)) for key, _ in columns]
        turns = "—" if row.get("turns") is None else f"{row['turns']:.1f}"
        lines.append(f"| {name} | {row['questions']} | " + " | ".join(cells) + f" | {_pct(row.get('answered'))} | {turns} |")
    return "\n".join(lines)


def settings_lines(meta: dict[str, Any]) -> list[str]:
    """The settings behind every number, one line each."""
    decoding = "greedy" if meta["temperature"] == 0 else f"temperature {meta['temperature']}, seed {meta['seed']}"
    return [
        f"- policy: `{meta['policy']}`; decoding: {decoding}; samples per question (k): {meta['samples']}",
        f"- search: `{meta['search_backend']}` ({meta['search_index']}), top-k {meta['top_k']}; reader: `{meta['reader']}`",
        (f"- limits: {meta['max_turns']} turns, {meta['max_tokens_per_turn']} tokens per turn, "
         f"context budget {meta['context_budget']} tokens"),
        f"- judge: {('`' + meta['judge_model'] + '` (exact match counts as correct)') if meta['judge_model'] else 'none'}",
        f"- date: {meta['date']}; config hash: `{meta['config_hash']}`",
    ]


def baseline_tables(document: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(benchmark, Markdown table) per world benchmark: the policy's F1 beside each no-tools baseline, by task type."""
    from deepresearcher.eval.baselines import BaselineReport, margin_rows

    tables = []
    for label, section in document.get("baselines", {}).items():
        rows = margin_rows(BaselineReport.from_dict(section), {"policy": section["model_f1"]})
        cols = list(rows[0])
        lines = ["| " + " | ".join(cols) + " |", "|---|" + "---:|" * (len(cols) - 1)]
        for row in rows:
            cells = [f"{100 * v:+.1f}" if c == "margin" else _pct(v) if isinstance(v, float) else str(v)
                     for c, v in row.items()]
            lines.append("| " + " | ".join(cells) + " |")
        tables.append((label, lines))
    return tables


BASELINES_NOTE = ("F1 in percent by task type. The baselines answer without tools, from guesses fitted on the "
                  "world's train split only: type prior (best constant answer per type), relation prior (per type "
                  "and relation), cannot find; best: per type, the one that did best on held-out training tasks. "
                  "margin: the policy's F1 minus best's, in points.")


def write_reports(out: Path, records: list[dict[str, Any]], config: Config, order: list[str] | None = None,
                  baselines: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write metrics.json, report.md and report.html into ``out``; return the metrics document.

    ``baselines`` (``runner.world_baselines``) adds, per world benchmark, the no-tools baselines table.
    """
    from deepresearcher.eval.viewer import render_html

    document = metrics_document(records, config, order)
    if baselines:
        document["baselines"] = baselines
    (out / "metrics.json").write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    k = document["meta"]["samples"]
    md = [
        "# Evaluation",
        "",
        f"Metrics in percent, mean@{k} over samples" + (f"; pass@{k} over {k} samples" if k > 1 else "") + "; "
        "the average row is the unweighted mean over benchmarks.",
        "",
        markdown_table(document),
        "",
        *settings_lines(document["meta"]),
        "",
    ]
    for label, lines in baseline_tables(document):
        md += [f"## No-tools baselines: {label}", "", BASELINES_NOTE, "", *lines, ""]
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")
    (out / "report.html").write_text(render_html(document, records), encoding="utf-8")
    return document
