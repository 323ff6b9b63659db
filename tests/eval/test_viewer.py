"""report.html in headless Chromium: it renders every rollout, a filter in the URL hash hides the rest,
model text cannot inject markup, and a screenshot is saved. Skipped where Debian's ``chromium`` is absent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import Config
from deepresearcher.eval.behaviours import behaviour_record
from deepresearcher.eval.report import write_reports
from deepresearcher.reports import outcome, slim_record

EVIL = "</script><script>document.title='owned'</script><b id=evil>x</b>"


def _record(bench: str, task: str, question: str, answer: str | None, golds: list[str], em: float, f1: float, cover: float,
            notes: str = "notes from the page"):
    search = {"name": "web_search", "arguments": {"query": [question]}, "error": None,
              "observation": [{"search_query": question, "web_page_info_list": [
                  {"title": "Some page", "url": "https://example.org/p", "quick_summary": "a snippet " + EVIL}]}]}
    browse = {"name": "browse_webpage", "arguments": {"url_list": ["https://example.org/p"]}, "error": None,
              "observation": [{"url": "https://example.org/p", "information": notes}]}
    turns = [{"text": "<think>Let me search.</think>\n<tool_call>{}</tool_call>", "tool_call": search},
             {"text": "<think>Read it.</think>\n<tool_call>{}</tool_call>", "tool_call": browse}]
    if answer is not None:
        turns.append({"text": f"<think>Done.</think>\n<answer>{answer}</answer>", "tool_call": None})
    trajectory = Trajectory.model_validate({"question": question, "turns": turns, "answer": answer})
    behaviour = behaviour_record(trajectory, {"type": bench, "golds": golds}).to_dict()
    return {"benchmark": bench, "task_id": task, "sample": 0, "question": question, "golds": golds, "answer": answer,
            "em": em, "f1": f1, "cover_em": cover, "judge": None, "format_ok": True, "turns": len(turns),
            "seconds": 1.0, "termination": "answer" if answer else "max_turns", "trajectory": {"turns": turns},
            "behaviour": behaviour}


@pytest.fixture
def report(tmp_path) -> Path:
    records = [
        _record("hotpotqa", "h1", "Who directed Ed Wood?", "Tim Burton", ["Tim Burton"], 1, 1, 1,
                notes="Ed Wood is a film directed by Tim Burton."),
        _record("hotpotqa", "h2", "Where was Burton born?", "California", ["Burbank, California"], 0, 0.67, 0),
        _record("2wiki", "w1", "When was X born? " + EVIL, "1900", ["1901"], 0, 0, 0),
        _record("2wiki", "w2", "Who founded Y?", None, ["Z"], 0, 0, 0),
    ]
    write_reports(tmp_path, records, Config())
    return tmp_path / "report.html"


def test_outcome_buckets():
    assert [outcome(r) for r in ({"answer": None}, {"answer": "a", "judge": 1.0, "cover_em": 0},
                                 {"answer": "a", "cover_em": 1.0}, {"answer": "a", "cover_em": 0, "f1": 0.2},
                                 {"answer": "a", "judge": 0.0, "cover_em": 1.0, "f1": 1.0})] == [
        "no_answer", "correct", "correct", "partial", "partial"]


def test_slim_record_keeps_the_conversation_and_drops_tokens():
    record = _record("a", "t", "Q?", "Zed", ["Zed"], 1, 1, 1)
    record["trajectory"]["segments"] = [{"source": "prompt", "token_ids": list(range(1000))}]
    slim = slim_record(record)
    assert "segments" not in str(slim) and slim["turns"][0]["thought"] == "Let me search."
    assert slim["turns"][0]["call"]["results"][0]["hits"][0]["url"] == "https://example.org/p"
    assert slim["turns"][1]["call"]["results"][0]["notes"] == "notes from the page"
    assert slim["behaviours"] == ["unsupported", "no_reflection"]  # "Zed" is in no observation, and it answered anyway


def test_the_file_is_self_contained(report):
    text = report.read_text()
    assert "<script src" not in text and "<link" not in text and "@import" not in text
    assert "cdn" not in text.lower()


def _visible(dom: str) -> list[str]:
    tags = re.findall(r"<details[^>]*>", dom)
    return [t for t in tags if " hidden" not in t]


def test_renders_filters_and_screenshots_in_headless_chromium(report, tmp_path, chromium):
    """All 4 rollouts render; #bench=hotpotqa&outcome=partial leaves one; injected markup stays text."""
    url = report.resolve().as_uri()
    full = chromium(tmp_path / "p1", "--dump-dom", url)
    assert full.returncode == 0, full.stderr[-2000:]
    dom = full.stdout
    assert len(_visible(dom)) == 4 and 'id="shown">4<' in dom
    assert 'data-ready="1"' in dom
    assert 'id="evil"' not in dom and "owned" not in dom.split("<title>")[1].split("</title>")[0]
    assert "&lt;/script&gt;" in dom  # the question's markup is shown as text

    filtered = chromium(tmp_path / "p2", "--dump-dom", url + "#bench=hotpotqa&outcome=partial").stdout
    visible = _visible(filtered)
    assert len(visible) == 1 and 'data-bench="hotpotqa"' in visible[0] and 'data-outcome="partial"' in visible[0]
    assert 'id="shown">1<' in filtered
    assert len(_visible(chromium(tmp_path / "p3", "--dump-dom", url + "#outcome=no_answer").stdout)) == 1
    grounded = _visible(chromium(tmp_path / "p6", "--dump-dom", url + "#behaviour=grounded").stdout)
    assert len(grounded) == 1 and 'data-behaviours=" grounded ' in grounded[0]
    assert len(_visible(chromium(tmp_path / "p7", "--dump-dom", url + "#behaviour=unsupported").stdout)) == 2

    opened = chromium(tmp_path / "p4", "--dump-dom", url + "#bench=hotpotqa&open=1").stdout
    assert opened.count("<details") == 4 and opened.count(" open=") == 2
    assert "search: Who directed Ed Wood?" in opened and "notes from the page" in opened and "Tim Burton" in opened
    assert "EM 100 · F1 100 · cover-EM 100" in opened

    shot = tmp_path / "report.png"  # kept in pytest's tmp dir for a look
    chromium(tmp_path / "p5", f"--screenshot={shot}", "--window-size=1200,1400", url + "#bench=hotpotqa&open=1")
    assert shot.is_file() and shot.stat().st_size > 5000
    print(f"screenshot: {shot}")
