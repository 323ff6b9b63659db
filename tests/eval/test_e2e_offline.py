"""The end-to-end eval of docs/eval.md: embedded SmolLM2, extractive reader, the offline Wikipedia corpus,
50 questions each of HotpotQA, 2Wiki and MuSiQue; killed once mid-way and resumed. Minutes on a CPU:
marked slow (``pytest -m slow tests/eval/test_e2e_offline.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

BENCHMARKS = "hotpotqa:distractor_dev,2wiki:flashrag_dev,musique:flashrag_dev"
LIMIT = 50

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3 * 3600)]


def _count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.is_file() else 0


def test_offline_eval_completes_and_resumes_after_a_kill(tmp_path, shared_data_dir):
    from deepresearcher.eval.corpus import build_eval_corpus

    corpus = build_eval_corpus(tmp_path / "corpus", shared_data_dir)
    out = tmp_path / "eval"
    command = [
        sys.executable, "-m", "deepresearcher.cli.main", "eval", "-b", BENCHMARKS, "--limit", str(LIMIT),
        "--data-dir", str(shared_data_dir), "--out", str(out), "--set", f"search.index={corpus.index_dir}",
        "--set", "agent.policy=smollm2", "--set", "browse.reader=extractive", "--set", "agent.max_turns=4",
        "--set", "agent.max_tokens_per_turn=256", "--set", "agent.context_budget=8192",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = out / "trajectories.jsonl"
    while _count(path) < 8 and proc.poll() is None:
        time.sleep(1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    before = _count(path)
    assert 0 < before < 3 * LIMIT
    rerun = subprocess.run(command, check=False, env=env, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    keys = [(r["benchmark"], r["task_id"]) for r in records]
    assert len(keys) == len(set(keys)) == 3 * LIMIT
    metrics = orjson.loads((out / "metrics.json").read_bytes())
    assert [metrics["benchmarks"][b]["questions"] for b in BENCHMARKS.split(",")] == [LIMIT] * 3
    assert metrics["meta"]["reader"] == "extractive" and metrics["meta"]["search_backend"] == "local"
    print((out / "report.md").read_text())
