"""``deepresearcher eval`` (rollouts, scores, reports; resumable) and ``deepresearcher eval-corpus``."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from deepresearcher.cli.common import ConfigOption, SetOption, config_for_policy, resolve_config

console = Console(stderr=True)
_OUT = typer.Option(..., "--out", help="Eval folder (created; rerun with the same folder to resume).")
_DATA = typer.Option(None, "--data", help="A data file of one or several benchmarks (e.g. DeepResearcher's "
                     "dev.parquet); its rows replace the registry's.")
_DATA_DIR = typer.Option(None, "--data-dir", help="Folder of the benchmark files (eval.data_dir; default "
                         "$DEEPRESEARCHER_DATA_DIR, else ../shared/datasets beside the repository).")
_CORPUS_OUT = typer.Option(..., "--out", help="Folder for corpus.jsonl, index/ and sources.json.")


def eval_command(
    out: Path = _OUT,
    policy: str = typer.Option(
        None, "--policy", help="The policy to evaluate: smollm2 | model dir | vllm:URL | vllm:<model path> | openai:URL "
        "(agent.policy).",
    ),
    benchmarks: str = typer.Option(
        None, "--benchmarks", "-b",
        help="Comma-separated: nq,tq,hotpotqa,2wiki,musique,bamboogle,popqa,frames,world; `name:split` picks a "
        "split (eval.benchmarks).",
    ),
    split: str = typer.Option(None, "--split", help="Split of benchmarks named without one (eval.split; default test)."),
    limit: int = typer.Option(None, "--limit", help="Questions per benchmark at most (eval.limit)."),
    samples: int = typer.Option(None, "--samples", "-k", help="Rollouts per question, for pass@k / mean@k (eval.samples)."),
    temperature: float = typer.Option(
        None, "--temperature", help="0 is greedy (eval.temperature; default: the protocol's, 0 or 1.0)."
    ),
    seed: int = typer.Option(None, "--seed", help="Base sampling seed (eval.seed)."),
    agent: str = typer.Option(
        None, "--agent", help="Evaluate an agent given as a program, run once per question against the policy "
        "behind the OpenAI-compatible endpoint and the tools: a command or module:function (train.agent.program; "
        "docs/agents.md).",
    ),
    data: Path = _DATA,
    data_dir: Path = _DATA_DIR,
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate every question; run no model, write nothing."),
    config: Path = ConfigOption,
    overrides: list[str] = SetOption,
) -> None:
    """Evaluate a policy on QA benchmarks: rollouts, EM/F1/cover-EM/judge, report.md and report.html."""
    flags = {"agent.policy": policy, "eval.split": split, "eval.limit": limit, "eval.samples": samples,
             "eval.temperature": temperature, "eval.seed": seed, "eval.data_dir": data_dir,
             "train.agent.program": agent}
    sets = [*(overrides or []), *(f"{k}={v}" for k, v in flags.items() if v is not None)]
    if benchmarks:
        names = [b.strip() for b in benchmarks.split(",") if b.strip()]
        sets.append("eval.benchmarks=[" + ",".join(f"'{b}'" for b in names) + "]")  # quoted: YAML must not read `no`
    cfg = resolve_config(config_for_policy(config, policy), sets)
    if dry_run:
        from deepresearcher.eval.dryrun import dry_run as validate

        report = validate(cfg, data)
        typer.echo(json.dumps(report.to_dict(), indent=2))
        raise typer.Exit(0 if report.ok else 1)

    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from deepresearcher.eval.report import baseline_tables, behaviour_table, markdown_table
    from deepresearcher.eval.runner import run_eval

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as bar:
        task = bar.add_task("eval", total=None)

        def on_start(pending: int, total: int) -> None:
            bar.update(task, total=total, completed=total - pending, description=f"eval → {out}")

        episodes: list[dict] = []  # each rollout's trajectory metadata: how an agent program's runs ended

        def on_record(record: dict) -> None:
            bar.advance(task)
            episodes.append(record["trajectory"].get("metadata", {}))

        result = run_eval(cfg, out, data_file=data, on_start=on_start, on_record=on_record)
    typer.echo(markdown_table(result.metrics))
    for label, table in baseline_tables(result.metrics):
        typer.echo(f"\nNo-tools baselines of {label} (F1 in percent, fitted on its train split):\n" + table.markdown())
    if (behaviours := behaviour_table(result.metrics)) is not None:
        typer.echo("\nResearch behaviours (rate, and the episodes it is measured on; docs/eval.md):\n"
                   + behaviours.markdown())
    typer.echo(f"\n{result.ran} rollouts run now, {result.total} in the eval; reports in {out}/report.md and "
               f"{out}/report.html (config hash {result.metrics['meta']['config_hash']}).")
    if cfg.train.agent is not None:
        from deepresearcher.endpoint.programs import program_failures

        if (failures := program_failures(episodes)) is not None:
            console.print(failures, style="yellow", markup=False, highlight=False)


def eval_corpus(
    out: Path = _CORPUS_OUT,
    data_dir: Path = _DATA_DIR,
    no_index: bool = typer.Option(False, "--no-index", help="Write corpus.jsonl only (index it with `index build`)."),
) -> None:
    """Build the offline eval corpus (HotpotQA/2Wiki/MuSiQue paragraphs + Wikipedia summaries) and its index."""
    from deepresearcher.eval.corpus import build_eval_corpus

    report = build_eval_corpus(out, data_dir, index=not no_index)
    typer.echo(f"{report.pages:,} pages ({report.paragraphs:,} paragraphs) in {report.corpus_path}")
    if not no_index:
        typer.echo(f"indexed in {report.index_seconds:.1f}s: use --set search.backend=local "
                   f"--set search.index={report.index_dir}")


def register(app: typer.Typer) -> None:
    app.command(
        "eval",
        epilog="Examples: deepresearcher eval -b hotpotqa,2wiki --limit 50 --out runs/eval-x "
        "--set search.index=corpora/eval/index ; deepresearcher eval --data dev.parquet --dry-run --out /tmp/x ; "
        "deepresearcher eval --policy vllm:models/DeepResearcher-7b --set agent.protocol=deepresearcher "
        "-b bamboogle --out runs/eval-paper",
    )(eval_command)
    app.command("eval-corpus", epilog="Example: deepresearcher eval-corpus --out corpora/eval --data-dir "
                "../shared/datasets")(eval_corpus)
