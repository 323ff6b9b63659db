"""The run report: curves from metrics.jsonl, evaluation tables and example trajectories in report.html."""

from __future__ import annotations

from pathlib import Path

from deepresearcher.agent.trajectory import Trajectory, TurnRecord
from deepresearcher.train.report import write_report
from deepresearcher.train.run_dir import RunDir, read_metrics


def test_report_has_curves_tables_and_examples(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    for step in (1, 2, 3):
        run.append_metrics({"step": step, "reward": 0.1 * step, "f1": 0.2 * step, "kl": float("nan"), "entropy": 3.0})
    run.write_samples(3, [Trajectory(question="Who founded <Acme>?", golds=["Ann"], answer="Ann",
                                     turns=[TurnRecord(text="I will search.</think><answer>Ann</answer>")],
                                     metadata={"reward": 1.0})])
    page = write_report(run, title="t", tables={"Held-out": [{"stage": "after SFT", "f1": 0.5}]}).read_text()
    assert read_metrics(run.metrics_path)[0]["kl"] is None, "non-finite numbers are stored as null"
    for name in ("curve_reward.png", "curve_f1.png", "curve_entropy.png", "learning_curve.png"):
        assert (run.root / name).stat().st_size > 1000
        assert name in page
    assert "curve_kl.png" not in page, "a metric with no finite value gets no plot"
    assert "<td>0.500</td>" in page and "Who founded &lt;Acme&gt;?" in page and "step_00003.jsonl" in page


def test_truncate_metrics_after_checkpoint(tmp_path: Path) -> None:
    """A resumed run rewrites the steps after its checkpoint, so their old lines are dropped."""
    run = RunDir(tmp_path)
    for step in (1, 2, 3, 4):
        run.append_metrics({"step": step})
    run.truncate_metrics_after(2)
    assert [m["step"] for m in read_metrics(run.metrics_path)] == [1, 2]
