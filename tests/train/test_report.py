"""The run report: curves, tables, settings and episodes, on the same page and viewer as an eval's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from deepresearcher.agent.trajectory import ToolCallRecord, Trajectory, TurnRecord
from deepresearcher.config import Config
from deepresearcher.train.report import trajectory_record, write_report
from deepresearcher.train.run_dir import RunDir, read_metrics


def _episode(question: str, answer: str | None, **metadata: Any) -> Trajectory:
    search = ToolCallRecord(name="web_search", arguments={"query": [question]}, observation=[
        {"search_query": question, "web_page_info_list": [
            {"title": "Acme", "url": "https://wikiverse.org/wiki/Acme", "quick_summary": "Acme is an organization"}]}])
    turns = [TurnRecord(text="I need the founder.</think>\n<tool_call>{}</tool_call>", tool_call=search)]
    if answer is not None:
        turns.append(TurnRecord(text=f"Found it.</think>\n<answer>{answer}</answer>"))
    return Trajectory(task_id="t1", question=question, golds=["Ann"], answer=answer, turns=turns,
                      termination="answer" if answer else "max_turns", metadata=metadata)


def _embedded(page: str) -> dict[str, Any]:
    """The viewer's records as the page embeds them."""
    data = re.search(r'<script type="application/json" id=data>(.*?)</script>', page, re.DOTALL)
    assert data, "the page has no trajectory viewer"
    return json.loads(data.group(1).replace("<\\/", "</"))


def test_report_has_curves_tables_settings_and_sampled_episodes(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.write_config(Config())
    for step in (1, 2, 3):
        run.append_metrics({"step": step, "reward": 0.1 * step, "f1": 0.2 * step, "kl": float("nan"), "entropy": 3.0})
        run.write_samples(step, [_episode(f"Who founded <Acme>, step {step}?", "Ann", reward=1.0, f1=1.0, em=1.0, format_error=0.0)])
    times = [{"step": "world", "seconds": "1.5"}, {"step": "sft", "seconds": "529.4"}]
    page = write_report(run, title="t", tables={"Held-out": [{"stage": "after SFT", "f1": 0.5}], "Step times": times}).read_text()
    assert read_metrics(run.metrics_path)[0]["kl"] is None, "non-finite numbers are stored as null"
    for name in ("curve_reward.png", "curve_f1.png", "curve_entropy.png", "learning_curve.png"):
        assert (run.root / name).stat().st_size > 1000
        assert name in page
    assert "curve_kl.png" not in page, "a metric with no finite value gets no plot"
    assert "<h2>Held-out</h2>" in page and "<td>0.500</td>" in page
    assert "<h2>Step times</h2>" in page and "<tr><td>sft</td><td>529.4</td></tr>" in page, "timings are a table"
    assert "{'" not in page, "no Python dict printed into the page"
    assert "100 steps of 256 prompts x 16 rollouts" in page and "<code>extractive</code>" in page, "settings"
    data = _embedded(page)
    assert data["groups"] == ["GRPO samples, step 1", "GRPO samples, step 3"], "the first and the last sampled step"
    first = data["records"][0]
    assert first["question"] == "Who founded <Acme>, step 1?" and first["outcome"] == "correct" and first["reward"] == 1.0
    assert first["turns"][0]["call"]["results"][0]["hits"][0]["url"] == "https://wikiverse.org/wiki/Acme"


def test_held_out_trajectories_are_browsable_like_an_eval(tmp_path: Path, chromium) -> None:
    """Held-out episodes passed to the writer render in the viewer; the URL hash filters them by stage."""
    run = RunDir(tmp_path / "run")
    held_out = [
        trajectory_record(_episode("Who founded Acme?", "Ann"), "after GRPO", f1=1.0, em=1.0, reward=1.0, format_error=0.0),
        trajectory_record(_episode("Who founded Zeta?", None), "after SFT", f1=0.0, em=0.0, reward=0.0, format_error=1.0),
    ]
    page = write_report(run, title="quickstart", trajectories=held_out)
    data = _embedded(page.read_text())
    assert [(r["group"], r["outcome"], r["format_ok"]) for r in data["records"]] == [
        ("after GRPO", "correct", True), ("after SFT", "no_answer", False)]
    assert "segments" not in page.read_text(), "token ids stay out of the page"

    dom = chromium(tmp_path / "p1", "--dump-dom", page.resolve().as_uri() + "#bench=after%20GRPO&open=1")
    assert dom.returncode == 0, dom.stderr[-2000:]
    shown = [tag for tag in re.findall(r"<details[^>]*>", dom.stdout) if " hidden" not in tag]
    assert len(shown) == 1 and 'data-bench="after GRPO"' in shown[0] and 'id="shown">1<' in dom.stdout
    assert "search: Who founded Acme?" in dom.stdout and "https://wikiverse.org/wiki/Acme" in dom.stdout
    assert "reward 1.00" in dom.stdout and "F1 100" in dom.stdout


def test_truncate_metrics_after_checkpoint(tmp_path: Path) -> None:
    """A resumed run rewrites the steps after its checkpoint, so their old lines are dropped."""
    run = RunDir(tmp_path)
    for step in (1, 2, 3, 4):
        run.append_metrics({"step": step})
    run.truncate_metrics_after(2)
    assert [m["step"] for m in read_metrics(run.metrics_path)] == [1, 2]
