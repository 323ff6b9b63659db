"""``metrics.json``, ``report.md`` and ``report.html`` of an eval, from its scored rollouts.

``metrics.json`` holds the settings once (``meta``), the table (``benchmarks`` and ``average`` rows)
and a flat ``results`` list in which every number carries its own metric, benchmark, search backend,
top-k, reader, judge model, date and config hash, so a number copied anywhere stays comparable::

    {"benchmark": "hotpotqa", "metric": "cover_em", "aggregate": "mean@1", "value": 0.12, "n": 50,
     "search_backend": "local", "top_k": 10, "reader": "extractive", "judge_model": null,
     "date": "...", "config_hash": "3f9c1d2ab0e4", ...}

Metrics are fractions in JSON and percentages in the reports. ``report.html`` is the shared report
page (``deepresearcher.reports``): this table, the settings, and every trajectory in the viewer.

Imports run one way: ``eval.runner`` -> ``eval.report`` -> ``eval.aggregate``, ``reports``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import orjson

from deepresearcher.config import Config
from deepresearcher.eval.aggregate import METRICS, summarize
from deepresearcher.eval.behaviours import behaviour_rows, rates_by_benchmark
from deepresearcher.reports import ReportPage, Table

__all__ = ["baseline_tables", "behaviour_table", "markdown_table", "metrics_document", "metrics_table", "render_html", "report_meta",
           "write_reports"]

_LABELS = {
    "em": "EM (folded)",
    "f1": "F1 (folded)",
    "cover_em": "cover-EM (folded)",
    "squad_em": "EM (SQuAD)",
    "squad_f1": "F1 (SQuAD)",
    "deepresearcher_em": "EM (DeepResearcher)",
    "deepresearcher_f1": "F1 (DeepResearcher)",
    "mbe": "MBE (DeepResearcher)",
    "judge": "judge",
}
"""Column titles, each naming its metric: folded (ours), the official SQuAD script, the paper's own EM, F1, MBE."""
_META_KEYS = ("search_backend", "search_index", "top_k", "reader", "judge_model", "judge_prompt", "judge_attempts",
              "policy", "date", "config_hash")


def report_meta(config: Config, date: str | None = None) -> dict[str, Any]:
    """The settings every reported number carries."""
    judge = config.eval.judge
    index = config.search.index
    return {
        "date": date or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "config_hash": config.config_hash(),
        "policy": config.agent.policy + (f" ({config.agent.policy_model})" if config.agent.policy_model else ""),
        "protocol": config.agent.protocol,
        "search_backend": config.search.backend,
        "search_index": str(index) if index else ("default world" if config.search.backend == "local" else None),
        "top_k": config.search.top_k,
        "reader": config.browse.reader + (f" ({config.reader_llm.kind})" if config.browse.reader == "llm" else ""),
        "judge_model": (judge.model or judge.kind) if judge else None,
        "judge_prompt": config.eval.judge_prompt if judge else None,
        "judge_attempts": config.eval.judge_attempts if judge else None,
        "samples": config.eval.samples,
        "temperature": config.eval.temperature,
        "seed": config.eval.seed,
        "max_turns": config.agent.max_turns,
        "max_tokens_per_turn": config.agent.max_tokens_per_turn,
        "context_budget": config.agent.context_budget,
    }


def metrics_document(records: list[dict[str, Any]], config: Config, order: list[str] | None = None,
                     date: str | None = None) -> dict[str, Any]:
    """The content of ``metrics.json``."""
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
    return {"meta": meta, **table, "results": results, "behaviours": rates_by_benchmark(records, order)}


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def metrics_table(document: dict[str, Any]) -> Table:
    """The report's table: one row per benchmark and the average; pass@k columns when k > 1."""
    k = document["meta"]["samples"]
    columns = [(m, _LABELS[m]) for m in METRICS]
    if k > 1:
        columns += [(f"pass@{k}_{m}", f"pass@{k} {_LABELS[m]}") for m in ("cover_em", "mbe", "judge")]

    def cells(name: str, row: dict[str, Any]) -> list[str]:
        turns = "—" if row.get("turns") is None else f"{row['turns']:.1f}"
        return [name, str(row["questions"]), *(_pct(row.get(key)) for key, _ in columns), _pct(row.get("answered")), turns]

    return Table(["benchmark", "n", *(label for _, label in columns), "answered", "turns"],
                 [cells(name, row) for name, row in document["benchmarks"].items()],
                 total=cells("average", document["average"]))


def markdown_table(document: dict[str, Any]) -> str:
    """``metrics_table`` in Markdown, as ``report.md`` and the terminal show it."""
    return metrics_table(document).markdown()


def _judge_line(meta: dict[str, Any], average: dict[str, Any]) -> str:
    if not meta["judge_model"]:
        return "none"
    calls = "" if average.get("judge_asked") is None else (
        f"; {average['judge_asked']} calls, {average['judge_unparsed']} replies without a verdict")
    return (f"`{meta['judge_model']}`, prompt `{meta.get('judge_prompt')}` for *judge*, the paper's for *MBE* "
            f"(exact match counts as correct; asked up to {meta.get('judge_attempts')} times for a verdict{calls})")


def settings_lines(meta: dict[str, Any], average: dict[str, Any] | None = None) -> list[str]:
    """The settings behind every number, one line each (Markdown, without the list bullet); ``average`` (the
    table's average row) adds the judge's call counts."""
    decoding = "greedy" if meta["temperature"] == 0 else f"temperature {meta['temperature']}, seed {meta['seed']}"
    return [
        (f"policy: `{meta['policy']}`, protocol `{meta.get('protocol', 'native')}`; decoding: {decoding}; "
         f"samples per question (k): {meta['samples']}"),
        f"search: `{meta['search_backend']}` ({meta['search_index']}), top-k {meta['top_k']}; reader: `{meta['reader']}`",
        (f"limits: {meta['max_turns']} turns, {meta['max_tokens_per_turn']} tokens per turn, "
         f"context budget {meta['context_budget']} tokens"),
        f"judge: {_judge_line(meta, average or {})}",
        "metrics: *folded* = SQuAD normalization after Unicode folding; *SQuAD* = the official script; "
        "*DeepResearcher* = the paper's evaluation script (punctuation to spaces, articles kept, F1 over token "
        "sets, the first answer of the last assistant turn behind its tag check)",
        f"date: {meta['date']}; config hash: `{meta['config_hash']}`",
    ]


def baseline_tables(document: dict[str, Any]) -> list[tuple[str, Table]]:
    """(benchmark, table) per world benchmark: the policy's F1 beside each no-tools baseline, by task type."""
    from deepresearcher.eval.baselines import BaselineReport, margin_rows

    tables = []
    for label, section in document.get("baselines", {}).items():
        ses = {"policy": section["model_f1_se"]} if "model_f1_se" in section else None
        rows = margin_rows(BaselineReport.from_dict(section), {"policy": section["model_f1"]}, ses)
        tables.append((label, Table.from_records([
            {c: f"{100 * v:+.1f}" if c == "margin" else _pct(v) if isinstance(v, float) else str(v) for c, v in row.items()}
            for row in rows
        ])))
    return tables


def behaviour_table(document: dict[str, Any]) -> Table | None:
    """The research behaviours per benchmark (and per task type of a world benchmark): rate (cases)."""
    groups = {(label if kind == "all" else f"{label} / {kind}"): rates
              for label, by_type in document.get("behaviours", {}).items() for kind, rates in by_type.items()}
    return Table.from_records(behaviour_rows(groups, label="benchmark")) if groups else None


BEHAVIOURS_NOTE = ("Research behaviours (docs/eval.md), each cell the rate and, in brackets, the episodes it is "
                   "measured on: grounded / unsupported answers (the answer appears, or not, in what the agent read), "
                   "pages and sites read per answer, on conflict tasks whether it saw the reliable and the "
                   "contradicting page and believed the reliable one, after a search without the needed evidence a "
                   "new query (reflected) or the same one, identical calls repeated per episode, abstention precision "
                   "and recall, on hop2/hop3 world tasks searches that follow the chain in order, on real questions "
                   "a later query built from a name read in the results.")


BASELINES_NOTE = ("F1 in percent by task type. The baselines answer without tools, from guesses fitted on the "
                  "world's train split only: type prior (best constant answer per type), relation prior (per type "
                  "and relation), cannot find; best: per type, the one that did best on held-out training tasks. "
                  "margin: the policy's F1 minus best's, in points. policy SE: the standard error of the policy's "
                  "F1 (sample standard deviation / sqrt(n)), in points; all: every task weighs the same.")


def render_html(document: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """``report.html``: the table, the no-tools baselines of world benchmarks, the settings and every rollout."""
    meta = document["meta"]
    baselines = baseline_tables(document)
    behaviours = behaviour_table(document)
    return ReportPage(
        "deepresearcher evaluation",
        notes=[f"Metrics in percent (mean@{meta['samples']}); the average row is the unweighted mean over benchmarks.",
               *([BASELINES_NOTE] if baselines else []), *([BEHAVIOURS_NOTE] if behaviours else [])],
        tables={"": metrics_table(document), **{f"No-tools baselines: {label}": t for label, t in baselines},
                **({"Research behaviours": behaviours} if behaviours else {})},
        settings=settings_lines(meta, document["average"]), records=records, doc_title=f"deepresearcher eval {meta['config_hash']}",
    ).html()


def write_reports(out: Path, records: list[dict[str, Any]], config: Config, order: list[str] | None = None,
                  baselines: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write metrics.json, report.md and report.html into ``out``; return the metrics document.

    ``baselines`` (``runner.world_baselines``) adds, per world benchmark, the no-tools baselines table.
    """
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
        *(f"- {line}" for line in settings_lines(document["meta"], document["average"])),
        "",
    ]
    for label, table in baseline_tables(document):
        md += [f"## No-tools baselines: {label}", "", BASELINES_NOTE, "", table.markdown(), ""]
    behaviours = behaviour_table(document)
    if behaviours is not None:
        md += ["## Research behaviours", "", BEHAVIOURS_NOTE, "", behaviours.markdown(), ""]
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")
    (out / "report.html").write_text(render_html(document, records), encoding="utf-8")
    return document
