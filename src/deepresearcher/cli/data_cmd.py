"""``deepresearcher data show|mix|contaminate``: look at benchmarks, build training mixes, filter them.

examples:
    deepresearcher data show hotpotqa --split distractor_dev
    deepresearcher data show deepresearcher --split dev
    deepresearcher data mix --out data/train.parquet --total 8000
    deepresearcher data mix --out mix.parquet --ratio nq:open_dev=1 --ratio hotpotqa:full_dev=3 --total 400
    deepresearcher data contaminate nq --split open_dev --decisions runs/nq-contamination.jsonl --k 10 \
        --kind openai --base-url http://gpu:8000/v1 --model Qwen2.5-7B-Instruct --kept nq-clean.parquet

Local files are read from --data-dir, $DEEPRESEARCHER_DATA_DIR or ../shared/datasets beside the repository; splits without a local file come
from the Hugging Face hub when it is reachable.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from deepresearcher.errors import ConfigError

console = Console()

DataDirOption = typer.Option(
    None, "--data-dir",
    help="Folder of local dataset files (default: $DEEPRESEARCHER_DATA_DIR, else ../shared/datasets beside the repository)."
)


def parse_ratio(spec: str, default_split: str) -> tuple[str, str, float]:
    """``NAME[:SPLIT]=WEIGHT`` -> (name, split, weight); ``hotpotqa=3`` uses ``default_split``."""
    key, sep, weight = spec.partition("=")
    name, _, split = key.partition(":")
    try:
        value = float(weight)
    except ValueError:
        value = -1.0
    if not sep or not name.strip() or value < 0:
        raise ConfigError(f"--ratio {spec!r} is not NAME[:SPLIT]=WEIGHT (e.g. hotpotqa=3 or nq:open_dev=1).")
    return name.strip(), (split.strip() or default_split), value


data_app = typer.Typer(
    help="Benchmarks: inspect them, build training mixes, drop questions the base model already knows.",
    no_args_is_help=True,
)


@data_app.command("show")
def show(
    name: str = typer.Argument(..., help="Benchmark: nq, tq, hotpotqa, 2wiki, musique, bamboogle, popqa, "
                                         "frames, deepresearcher."),
    split: str = typer.Option("test", help="Split (test and dev are DeepResearcher's own)."),
    path: Path | None = typer.Option(None, help="Read this file instead of the registered one."),
    limit: int | None = typer.Option(None, help="Read at most this many tasks."),
    examples: int = typer.Option(3, help="Examples to print."),
    data_dir: Path | None = DataDirOption,
) -> None:
    """Counts (tasks, per source, aliases, paragraphs) and a few examples."""
    from deepresearcher.data import get_benchmark, load_benchmark

    bench = get_benchmark(name)
    tasks = load_benchmark(bench.name, split, path=path, limit=limit, data_dir=data_dir)
    table = Table(title=f"{bench.name} / {path or split}: {len(tasks)} tasks")
    for column in ("source", "tasks", "mean aliases", "with paragraphs"):
        table.add_column(column, justify="left" if column == "source" else "right")
    by_source = Counter(t.source for t in tasks)
    for source, count in sorted(by_source.items()):
        group = [t for t in tasks if t.source == source]
        table.add_row(source, str(count), f"{sum(len(t.golds) for t in group) / count:.1f}",
                      str(sum(bool(t.context) for t in group)))
    console.print(table)
    console.print(f"splits of {bench.name}: {', '.join(bench.splits)}", highlight=False)
    for task in tasks[:examples]:
        golds = " | ".join(task.golds[:5]) + (f" (+{len(task.golds) - 5})" if len(task.golds) > 5 else "")
        console.print(f"[bold]{task.id}[/]  {task.question}\n    gold: {golds}", highlight=False)


@data_app.command("mix")
def mix(
    out: Path = typer.Option(..., "--out", help="Parquet file to write, in DeepResearcher's verl format."),
    ratio: list[str] | None = typer.Option(
        None, "--ratio", help="NAME[:SPLIT]=WEIGHT, repeatable. Default: the paper's nq=1 tq=1 hotpotqa=3 2wiki=3."
    ),
    split: str = typer.Option("train", help="Split of a pool whose --ratio names none."),
    total: int | None = typer.Option(None, help="Questions in the mix. Default: the most the pools allow."),
    seed: int = typer.Option(0, help="Seed of sampling and shuffling."),
    dedup: bool = typer.Option(True, help="Drop questions that appear in any local evaluation set."),
    data_dir: Path | None = DataDirOption,
) -> None:
    """Sample a training mix by ratio, without evaluation questions, and write it as verl parquet."""
    from deepresearcher.data import PAPER_RATIOS, evaluation_tasks, load_benchmark, make_mix, write_verl_parquet

    specs = [parse_ratio(r, split) for r in ratio] if ratio else [(n, split, w) for n, w in PAPER_RATIOS.items()]
    pools = {name: load_benchmark(name, pool_split, data_dir=data_dir) for name, pool_split, _ in specs}
    ratios = {name: weight for name, _, weight in specs}
    # A pool drawn from an evaluation split is the user's explicit choice; every *other* one is excluded.
    exclude = evaluation_tasks(data_dir, skip={(n, s) for n, s, _ in specs}) if dedup else []
    tasks, report = make_mix(pools, ratios, total=total, exclude=exclude, seed=seed)
    tasks = [t.model_copy(update={"split": "train"}) for t in tasks]
    write_verl_parquet(tasks, out)
    summary = {**report.to_dict(), "out": str(out), "total": len(tasks), "eval_questions": len(exclude),
               "pools": {name: pool_split for name, pool_split, _ in specs}}
    out.with_suffix(".mix.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    table = Table(title=f"{out}: {len(tasks)} questions (seed {seed})")
    for column in ("pool", "ratio", "taken", "available", "eval overlap", "duplicates"):
        table.add_column(column, justify="left" if column == "pool" else "right")
    for name in sorted(ratios):
        table.add_row(f"{name}:{summary['pools'][name]}", f"{ratios[name]:g}", str(report.counts[name]),
                      str(report.available[name]), str(report.dropped_eval_overlap[name]),
                      str(report.dropped_duplicates[name]))
    console.print(table)


@data_app.command("contaminate")
def contaminate(
    name: str = typer.Argument(..., help="Benchmark whose questions are checked (e.g. nq)."),
    decisions: Path = typer.Option(..., "--decisions", help="JSONL of decisions; a rerun resumes from it."),
    split: str = typer.Option("train", help="Split to check."),
    path: Path | None = typer.Option(None, help="Read this file instead of the registered one."),
    limit: int | None = typer.Option(None, help="Check at most this many questions."),
    k: int = typer.Option(10, min=1, help="Samples per question (the paper: 10)."),
    kept: Path | None = typer.Option(None, help="Write the questions that survive here (verl parquet)."),
    kind: str = typer.Option("embedded", help="Base model client: embedded, local or openai."),
    model: str = typer.Option("", help="`openai`: served model name; `local`: model directory."),
    base_url: str = typer.Option("http://127.0.0.1:8000/v1", help="`openai`: the server's /v1 root."),
    temperature: float = typer.Option(1.0, help="Sampling temperature of the k samples."),
    max_tokens: int = typer.Option(32, help="Tokens per closed-book answer."),
    concurrency: int = typer.Option(8, min=1, help="Questions in flight at once."),
    data_dir: Path | None = DataDirOption,
) -> None:
    """Drop questions the base model answers correctly without search in k samples (resumable)."""
    import asyncio

    from deepresearcher.config import LLMClientConfig
    from deepresearcher.data import chat_answer_fn, filter_contaminated, load_benchmark, write_verl_parquet
    from deepresearcher.llm.factory import make_chat_client

    if kind not in {"embedded", "local", "openai"}:
        raise ConfigError(f"--kind {kind!r} is not one of embedded, local, openai.")
    tasks = load_benchmark(name, split, path=path, limit=limit, data_dir=data_dir)
    client_config = LLMClientConfig(kind=kind, model=model, base_url=base_url, concurrency=concurrency,
                                    temperature=temperature, max_new_tokens=max_tokens)

    async def run():
        client = make_chat_client(client_config)
        try:
            answer = chat_answer_fn(client, temperature=temperature, max_tokens=max_tokens)
            return await filter_contaminated(tasks, answer, decisions, k=k, concurrency=concurrency)
        finally:
            await client.aclose()

    result = asyncio.run(run())
    if kept is not None:
        write_verl_parquet(result.kept, kept)
    console.print(
        f"{len(tasks)} questions: kept {len(result.kept)}, dropped {len(result.dropped)} "
        f"({result.resumed} decided by an earlier run); decisions in {decisions}"
        + (f", kept questions in {kept}" if kept else ""),
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    """Add the ``data`` command group."""
    app.add_typer(data_app, name="data")
