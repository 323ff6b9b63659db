"""What the quickstart reports: held-out rows an auditor can read, the model beside the no-tools
baselines, the machine's calibration figure beside the step timings, all on one page.

A held-out episode's row (``eval_after_*.jsonl``, ``train.heldout.heldout_row``) holds its scores plus the
answer, the golds and every turn with its tool call, so a constant answer or a policy that never
reads shows in the file itself. ``write_quickstart_report`` fits the no-tools baselines on the run's
training tasks (never its held-out ones), measures the machine (``quickstart.calibration``), and writes
``summary.json``, ``report.html`` (held-out trajectories in the viewer) and one ``eval`` page per
evaluation (``heldout_<stage>/report.html``, with the baselines).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from deepresearcher.config import Config
from deepresearcher.quickstart.calibration import Calibration
from deepresearcher.quickstart.timing import REFERENCE_TOKENS_PER_SECOND, normalised_seconds, stage_calibrations
from deepresearcher.train.run_dir import RunDir

HELD_OUT = "held-out"


def _viewer_record(row: dict[str, Any]) -> dict[str, Any]:
    """A held-out row in the shape of an ``eval`` record, for the eval viewer."""
    return {
        "benchmark": HELD_OUT, "task_id": row["id"], "sample": 0, "question": row.get("question", ""),
        "golds": row.get("golds", []), "answer": row.get("answer"), "em": row.get("em"), "f1": row.get("f1"),
        "cover_em": row.get("cover_em"), "judge": None, "termination": row.get("termination", ""),
        "format_ok": not row.get("format_error"), "turns": len(row.get("turns", [])),
        "trajectory": {"turns": row.get("turns", [])}, "behaviour": row.get("behaviour"),
    }


BEHAVIOURS_TITLE = "Research behaviours: the oracle, the baselines and the model"
BEHAVIOURS_NOTE = (
    "Research behaviours (docs/eval.md), each cell a rate and, in brackets, the episodes it is measured on. The "
    "oracle's first row is measured on its SFT episodes (training tasks, some of them snippet-only when "
    "train.sft.snippet_only_fraction > 0), the next on the held-out tasks: the reference of what reading the world "
    "as it is meant to be read looks like (both pages where an unreliable site shows, the reliable one believed); "
    "the first-hit baseline researches the held-out tasks and answers from each search's first hit (misled where an "
    "unreliable page ranks first); the best no-tools baseline answers them without reading anything (never "
    "grounded; its abstentions are its \"cannot find\" guesses); the stages are the model's held-out episodes.")
STUCK_CASES = 20
"""A rate is flagged as stuck when it is 0% (or 100%) on every source with at least this many cases."""


def _behaviour_sources(fitted: Any, test_tasks: list[dict[str, Any]], stages: dict[str, Any],
                       oracle: dict[str, Any] | None, references: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Behaviour rates by task type per source: the oracle (given), the scripted references on the held-out tasks,
    the best no-tools baseline, each stage."""
    from deepresearcher.agent.trajectory import Trajectory
    from deepresearcher.eval.baselines import GuessTask
    from deepresearcher.eval.behaviours import behaviour_record, rates_by_type

    guesses = [behaviour_record(Trajectory(question=t["question"], answer=fitted.answer("best", GuessTask.of(t))), t)
               for t in test_tasks]
    return {**({"oracle (SFT episodes)": oracle} if oracle else {}),
            **{f"{name} (held-out)": result.behaviours_by_type() for name, result in references.items()},
            "best no-tools baseline": rates_by_type(guesses),
            **{stage: result.behaviours_by_type() for stage, result in stages.items()}}


def _conflict_note(summary: dict[str, Any], model_f1: dict[str, dict[str, float]], reference_f1: dict[str, dict[str, float]],
                   baselines: Any, behaviours: dict[str, dict[str, Any]]) -> str | None:
    """What the conflict tasks say: each stage's F1 beside the baselines', GRPO's paired gain, and how often each
    source read both pages and believed the reliable one when the unreliable page ranked first."""
    if "conflict" not in baselines.n:
        return None
    f1 = "; ".join(f"{name} {scores['conflict']:.3f}" for name, scores in {**model_f1, **reference_f1}.items()
                   if "conflict" in scores)
    gain = summary.get("f1_gain_by_type", {}).get("conflict")
    read = "; ".join(
        f"{source} {_pct(by_type['conflict']['conflict_read_both'])} read both, "
        f"{_pct(by_type['conflict']['conflict_reliable_when_misled'])} right when the unreliable page ranked first"
        for source, by_type in behaviours.items() if "conflict" in by_type)
    return (f"Conflict tasks ({baselines.n['conflict']} held-out): F1 {f1}; best no-tools baseline "
            f"{baselines.f1['best']['conflict']:.3f}"
            + (f"; GRPO's paired gain {100 * gain['gain']:+.1f} points (SE {100 * gain['se']:.1f})" if gain else "")
            + f". {read}.")


def _pct(value: dict[str, Any]) -> str:
    return "—" if value["rate"] is None else f"{100 * value['rate']:.0f}% ({value['n']})"


def _kinds(behaviours: dict[str, dict[str, Any]]) -> list[str]:
    """The task types of any source, sorted, then ``all``."""
    return sorted({k for by_type in behaviours.values() for k in by_type} - {"all"}) + ["all"]


def _slug(stage: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", stage.lower()).strip("_")


def _pct_row(row: dict[str, Any]) -> dict[str, Any]:
    """Margins as signed F1 points, the rest as they are (the page prints F1 as fractions)."""
    return {k: f"{100 * v:+.1f}" if k.startswith("margin") and isinstance(v, float) else v for k, v in row.items()}


def _type_counts(tasks: list[dict[str, Any]]) -> str:
    """How the held-out tasks divide into types: "140 of each of 7 types" on a stratified set."""
    counts = Counter(t.get("type", "task") for t in tasks)
    if len(set(counts.values())) == 1:
        return f"{next(iter(counts.values()))} of each of {len(counts)} task types"
    return ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items()))


TIMINGS_TITLE = (f"Timings: each step beside the machine's calibration around it (SFT tokens/s, the mean of the "
                 f"figures taken before and after it; one taken at the end on the step's own thread count where it "
                 f"ran on fewer) and its seconds at {REFERENCE_TOKENS_PER_SECOND:,.0f} tokens/s")


def _normalised_timings(timings: dict[str, float], during: dict[str, Calibration], stage_threads: dict[str, int],
                        at_threads: dict[int, Calibration]) -> dict[str, Any]:
    """The summary's normalised timings: each step's calibration figure (at the thread count it ran on) and its
    seconds at the reference one."""
    figures = {name: c.sft_tokens_per_second for name, c in during.items()}
    own = {step: at_threads[n].sft_tokens_per_second for step, n in stage_threads.items() if n in at_threads}
    normalised = normalised_seconds(timings, figures, at_threads=own)
    return {"timings_calibration": {step: round(f, 1) for step, f in stage_calibrations(timings, figures, own).items()},
            "timings_normalised_s": normalised, "total_normalised_s": round(sum(normalised.values()), 1),
            "calibration_reference": REFERENCE_TOKENS_PER_SECOND,
            "calibration_at_threads": {n: c.sft_tokens_per_second for n, c in at_threads.items()}}


def _calibration_figures(during: dict[str, Calibration], at_threads: dict[int, Calibration]) -> list[str]:
    """Each calibration of the run as "name figure": those taken during it, then the end's at other thread counts."""
    return ([f"{name} {c.sft_tokens_per_second:,.0f}" for name, c in during.items()]
            + [f"end on {n} thread{'s' if n > 1 else ''} {c.sft_tokens_per_second:,.0f}" for n, c in at_threads.items()])


def _timing_rows(timings: dict[str, float], summary: dict[str, Any], during: dict[str, Calibration],
                 at_threads: dict[int, Calibration]) -> list[dict[str, str]]:
    """The Timings table: a row per step, the total, and the calibrations' own time (not in the total)."""
    figures, normalised = summary["timings_calibration"], summary["timings_normalised_s"]
    threads = summary.get("threads", {})
    rows = [{"step": name, "seconds": f"{seconds:.1f}", "threads": str(threads.get(name, "")),
             "calibration": f"{figures.get(name, 0):,.0f}",
             "seconds at reference": f"{normalised.get(name, 0):.1f}"} for name, seconds in timings.items()]
    return rows + [
        {"step": "total", "seconds": f"{sum(timings.values()):.1f}", "threads": "", "calibration": "",
         "seconds at reference": f"{summary['total_normalised_s']:.1f}"},
        {"step": "calibration (not in total)",
         "seconds": f"{sum(c.seconds for c in [*during.values(), *at_threads.values()]):.1f}",
         "threads": str(next(iter(during.values())).torch_threads),
         "calibration": ", ".join(_calibration_figures(during, at_threads)),
         "seconds at reference": ""},
    ]


def write_quickstart_report(
    run: RunDir,
    config: Config,
    *,
    summary: dict[str, Any],
    stages: dict[str, Any],
    train_tasks: list[dict[str, Any]],
    test_tasks: list[dict[str, Any]],
    timings: dict[str, float],
    calibrations: dict[str, Calibration] | None = None,
    notes: list[str] | None = None,
    say: Callable[[str], None] = print,
    oracle_behaviours: dict[str, Any] | None = None,
    references: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Add baselines and the calibration to ``summary``, write it with ``report.html`` and the trajectory pages.

    ``stages`` maps a stage name ("after SFT", "after GRPO") to its evaluation (``.rows``, one
    ``heldout_row`` per test task). ``calibrations`` are the machine's figures taken earlier in the run
    ("start", "after SFT"); one more is taken here ("end"): a machine that slowed down during the run shows
    it, where one figure at the end would not. ``oracle_behaviours`` (``eval.behaviours.rates_by_type`` of the
    oracle's SFT episodes) heads the research-behaviour tables, above the scripted ``references``' (name to their
    evaluation on the held-out tasks: the oracle, the first-hit baseline; their F1 stands beside the model's), the
    best no-tools baseline's and each stage's on the held-out tasks. A rate that is 0% (or 100%) on every source
    with at least ``STUCK_CASES`` cases is flagged (``summary["stuck_rates"]``): it cannot read otherwise here.
    Returns the completed summary.
    """
    from deepresearcher.eval.baselines import (
        fit_baselines,
        margin_rows,
        model_f1_by_type,
        model_f1_se_by_type,
    )
    from deepresearcher.eval.behaviours import behaviour_rows, stuck_rates
    from deepresearcher.eval.report import write_reports
    from deepresearcher.quickstart.calibration import calibrations_at_stage_threads, measure_machine
    from deepresearcher.reports import Table
    from deepresearcher.train.report import collapse_warnings, write_report

    types = {t["id"]: t.get("type", "task") for t in test_tasks}
    fitted = fit_baselines(train_tasks)
    baselines = fitted.evaluate(test_tasks)
    references = references or {}
    behaviours = _behaviour_sources(fitted, test_tasks, stages, oracle_behaviours, references)
    model_f1 = {stage: model_f1_by_type(result.rows, types) for stage, result in stages.items()}
    reference_f1 = {name: model_f1_by_type(result.rows, types) for name, result in references.items()}
    model_se = {stage: model_f1_se_by_type(result.rows, types) for stage, result in stages.items()}
    final = list(stages)[-1]
    calibration = measure_machine()
    during = {**(calibrations or {}), "end": calibration}
    stage_threads = summary.get("threads", {})
    at_threads = calibrations_at_stage_threads(stage_threads, calibration.torch_threads)
    best, margin = baselines.f1["best"]["all"], model_f1[final]["all"] - baselines.f1["best"]["all"]
    say(f"no-tools baselines (fitted on {len(train_tasks)} training tasks): best F1 {best:.3f}; "
        f"{final}: {model_f1[final]['all']:.3f}, margin {100 * margin:+.1f} points")
    speeds = ", ".join(_calibration_figures(during, at_threads))
    say(f"machine: {calibration.describe()}; during the run: {speeds}")
    overall = behaviour_rows({source: by_type["all"] for source, by_type in behaviours.items()}, label="source")
    say("research behaviours (rate and cases; the oracle on its SFT episodes, the rest on the held-out tasks):\n"
        + Table.from_records(overall).markdown())
    stuck = stuck_rates({source: by_type["all"] for source, by_type in behaviours.items()}, STUCK_CASES)
    stuck_note = (("STUCK RATES (the same on every source with at least "
                   f"{STUCK_CASES} cases, so they measure nothing here): "
                   + ", ".join(f"{name} {value}" for name, value in stuck.items())) if stuck else
                  f"No behaviour rate is stuck: each reads differently on some source with at least {STUCK_CASES} cases.")
    say(stuck_note)
    conflict = _conflict_note(summary, model_f1, reference_f1, baselines, behaviours)
    if conflict:
        say(conflict)
    warnings = collapse_warnings(run)
    for warning in warnings:
        say(f"WARNING: {warning}")
    summary = {**summary, "baselines": baselines.to_dict(model_f1=model_f1[final], model_f1_se=model_se[final]),
               "calibration": calibration.to_dict(),
               "calibration_during_run": {name: c.sft_tokens_per_second for name, c in during.items()},
               **_normalised_timings(timings, during, stage_threads, at_threads),
               "f1_by_type": model_f1, "reference_f1_by_type": reference_f1, "behaviours": behaviours,
               "stuck_rates": stuck, "collapse_warnings": warnings}

    pages = {}
    for stage, result in stages.items():
        out = run.root / f"heldout_{_slug(stage)}"
        out.mkdir(parents=True, exist_ok=True)
        section = baselines.to_dict(model_f1=model_f1[stage], model_f1_se=model_se[stage])
        named = config.model_copy(update={  # the page names the policy and decoding of this evaluation
            "agent": config.agent.model_copy(update={"policy": f"{run.root.name} model, {stage}"}),
            "eval": config.eval.model_copy(update={"temperature": 0.0, "samples": 1}),
        })
        write_reports(out, [_viewer_record(r) for r in result.rows], named, order=[HELD_OUT],
                      baselines={HELD_OUT: section})
        pages[f"Held-out trajectories {stage}"] = f"{out.name}/report.html"
    run.write_json("summary.json", summary)

    total = round(sum(timings.values()), 1)
    unseen = "a world never trained on" if config.train.num_worlds > 1 else "a split never trained on"
    lead = [
        (f"{len(test_tasks)} held-out tasks ({_type_counts(test_tasks)}; train.eval_world={config.train.eval_world}: {unseen}). "
         f"{final}: F1 {model_f1[final]['all']:.3f}; the best no-tools baseline, fitted on the {len(train_tasks)} "
         f"training tasks only, scores {best:.3f}: a margin of {100 * margin:+.1f} F1 points."),
        *(notes or []),
        (f"Steps took {total:.0f} s in all on this machine: {calibration.describe()}; the same figure during the "
         f"run: {speeds} tokens/s. A slower machine shows a lower figure; the same figure with longer steps "
         f"means a costlier recipe. At {REFERENCE_TOKENS_PER_SECOND:,.0f} tokens/s the steps would have taken "
         f"~{summary['total_normalised_s']:.0f} s (each step's seconds x the figure around it / "
         f"{REFERENCE_TOKENS_PER_SECOND:,.0f}: the Timings table)."),
    ]
    tables = {
        "Held-out F1 by task type, beside the no-tools baselines (SE: standard error; all: each task weighs the same)": [
            _pct_row(r) for r in margin_rows(baselines, model_f1, model_se, references=reference_f1)],
        ("Held-out evaluation (each figure with its standard error, `_se`: binomial for rates, sample SE for means; "
         "type_mean: each task type weighs the same, all: each task)"): [
            {"stage": stage, "type": kind, **s} for stage, result in stages.items() for kind, s in result.by_type().items()],
        **({"F1 gain from GRPO by task type, paired over the same tasks (points)": [
            {"type": kind, "gain": f"{100 * g['gain']:+.1f}", "SE": f"{100 * g['se']:.1f}"}
            for kind, g in summary["f1_gain_by_type"].items()]} if "f1_gain_by_type" in summary else {}),
        BEHAVIOURS_TITLE: overall,
        "Research behaviours by task type": behaviour_rows(
            {f"{kind}: {source}": by_type[kind] for kind in _kinds(behaviours) for source, by_type in behaviours.items()
             if kind in by_type}, label="type: source"),
        TIMINGS_TITLE: _timing_rows(timings, summary, during, at_threads),
    }
    lead.append(BEHAVIOURS_NOTE)
    lead.append(stuck_note)
    if conflict:
        lead.append(conflict)
    lead.append("Held-out trajectories, with baselines, one page per evaluation: "
                + ", ".join(f"`{href}`" for href in pages.values()) + "; and all of them below.")
    records = [{**_viewer_record(row), "group": stage} for stage, result in stages.items() for row in result.rows]
    write_report(run, title=f"deepresearcher quickstart ({config.train.run_name})", tables=tables, notes=lead,
                 trajectories=records)
    say(f"report: {run.root / 'report.html'}")
    return summary
