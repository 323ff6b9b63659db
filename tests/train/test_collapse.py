"""Collapse warnings: each sign fires on a metric series that shows it and stays quiet on a healthy run."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepresearcher.config import CollapseConfig, Config
from deepresearcher.train.collapse import CollapseWatch, collapse_signs
from deepresearcher.train.report import write_report
from deepresearcher.train.run_dir import RunDir

STEPS = 20


def _series(format_errors=None, entropy=None, zero_signal=None) -> list[dict]:
    """A healthy run (format errors ~1%, entropy ~0.05, a fifth of groups without signal), with any metric
    replaced by the given per-step function of the step."""
    return [{"step": s, "reward": 0.3 + 0.01 * s,
             "format_error_rate": format_errors(s) if format_errors else 0.01 + 0.005 * (s % 2),
             "entropy": entropy(s) if entropy else 0.05 + 0.004 * (s % 3),
             "zero_signal_share": zero_signal(s) if zero_signal else 0.2 + 0.05 * (s % 2)}
            for s in range(1, STEPS + 1)]


def test_a_healthy_run_shows_no_sign() -> None:
    assert collapse_signs(_series(), CollapseConfig()) == []
    # improving runs are healthy too: format errors falling, entropy moving within 2x, groups agreeing less
    improving = _series(format_errors=lambda s: 0.1 / s, entropy=lambda s: 0.05 * (1 + 0.04 * s),
                        zero_signal=lambda s: 0.45 - 0.01 * s)
    assert collapse_signs(improving, CollapseConfig()) == []


@pytest.mark.parametrize(("series", "kind", "words"), [
    (dict(format_errors=lambda s: 0.008 + 0.004 * s), "format_errors", "sampled format errors rose"),
    (dict(format_errors=lambda s: 0.3), "format_errors", "above train.collapse.format_error_max"),
    (dict(entropy=lambda s: 0.05 * 1.15 ** s), "entropy_high", "entropy grew"),
    (dict(entropy=lambda s: 0.05 * 0.88 ** s), "entropy_low", "entropy fell"),
    (dict(zero_signal=lambda s: min(0.9, 0.1 + 0.05 * s)), "zero_signal", "equal rewards"),
])
def test_each_sign_fires_on_a_series_that_shows_it(series: dict, kind: str, words: str) -> None:
    signs = collapse_signs(_series(**series), CollapseConfig())
    assert [s.kind for s in signs] == [kind] and words in signs[0].message and signs[0].step == STEPS


def test_thresholds_come_from_the_config() -> None:
    rising = _series(format_errors=lambda s: 0.008 + 0.004 * s)  # +6 points between the windows
    assert not collapse_signs(rising, CollapseConfig(format_error_rise=0.1))
    assert not collapse_signs(rising[:9], CollapseConfig()), "a trend needs 2 x window steps"
    assert collapse_signs(rising[:9], CollapseConfig(window=3, format_error_rise=0.02))  # +2.4 points in 9 steps


def test_the_watch_warns_once_per_sign_as_steps_arrive() -> None:
    watch = CollapseWatch(CollapseConfig())
    fired = [(r["step"], s.kind) for r in _series(zero_signal=lambda s: 0.8 if s > 8 else 0.2) for s in watch.update(r)]
    assert fired == [(11, "zero_signal")]  # the mean of steps 7-11 passes 0.5 at step 11, and is not repeated
    resumed = CollapseWatch(CollapseConfig(), watch.records)
    assert resumed.update({"step": 21, "zero_signal_share": 0.9}) == [], "a resumed run does not warn again"


def test_the_run_report_shows_the_warning_in_a_box(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.write_config(Config())
    for record in _series(entropy=lambda s: 0.05 * 1.15 ** s):
        run.append_metrics(record)
    page = write_report(run).read_text()
    assert "<div class=warn><h2>Warnings</h2>" in page and "Sign of collapse by step 20: policy entropy grew" in page

    healthy = RunDir(tmp_path / "healthy")
    healthy.write_config(Config())
    for record in _series():
        healthy.append_metrics(record)
    assert "class=warn" not in write_report(healthy).read_text()


def test_the_training_callback_logs_each_sign_as_its_step_ends(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The metrics callback GRPO runs with: each step's line goes to metrics.jsonl, a new sign to the log."""
    from types import SimpleNamespace

    from deepresearcher.train.grpo import RolloutStats, _trainer_callbacks

    run = RunDir(tmp_path / "run")
    rollouts = SimpleNamespace(latest=RolloutStats(), tokenizer=None)
    cfg = Config().train.model_copy(update={"max_steps": STEPS})
    metrics = next(c for c in _trainer_callbacks(rollouts, run, cfg, False) if type(c).__name__ == "MetricsCallback")
    with caplog.at_level("WARNING", logger="deepresearcher.train.grpo"):
        for record in _series(format_errors=lambda s: 0.008 + 0.004 * s):
            rollouts.latest = RolloutStats({k: v for k, v in record.items() if k not in ("step", "entropy")})
            metrics.on_log(None, SimpleNamespace(global_step=record["step"]), None,
                           logs={"loss": 0.1, "entropy": record["entropy"]})
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    # steps 1-5 average 2.0%, steps 14-18 7.2%: the first step past the 5-point rise, warned once
    assert len(warnings) == 1 and warnings[0].startswith("step 18: sign of collapse: sampled format errors rose")
    assert len(run.metrics_path.read_text().splitlines()) == STEPS
