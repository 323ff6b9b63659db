"""Evaluation: rollouts on benchmark questions, EM/F1/cover-EM and an LLM judge, reports and a viewer.

``run_eval(config, out)`` is what ``deepresearcher eval`` runs; ``build_eval_corpus`` makes the offline
Wikipedia index it can search; ``Judge`` is the paper's model-based evaluation (MBE).
"""

from deepresearcher.eval.aggregate import pass_at_k, summarize
from deepresearcher.eval.corpus import CorpusReport, build_eval_corpus, wiki_url
from deepresearcher.eval.dryrun import DryRunReport, dry_run
from deepresearcher.eval.judge import JUDGE_PROMPTS, MBE_PROMPT, REARTER_PROMPT, Judge, Verdict, parse_verdict
from deepresearcher.eval.report import markdown_table, metrics_document, render_html, write_reports
from deepresearcher.eval.runner import (
    TRAJECTORIES,
    EvalResult,
    load_eval_tasks,
    read_records,
    run_eval,
)
from deepresearcher.reports import outcome

__all__ = [
    "JUDGE_PROMPTS",
    "MBE_PROMPT",
    "REARTER_PROMPT",
    "TRAJECTORIES",
    "CorpusReport",
    "DryRunReport",
    "EvalResult",
    "Judge",
    "Verdict",
    "build_eval_corpus",
    "dry_run",
    "load_eval_tasks",
    "markdown_table",
    "metrics_document",
    "outcome",
    "parse_verdict",
    "pass_at_k",
    "read_records",
    "render_html",
    "run_eval",
    "summarize",
    "wiki_url",
    "write_reports",
]
