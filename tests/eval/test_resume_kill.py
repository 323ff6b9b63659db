"""An eval killed mid-way (SIGKILL, as an out-of-memory kill or a pulled plug) resumes where it stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import orjson

from deepresearcher.data import QATask, write_verl_parquet

N = 10


def _lines(path) -> list[dict]:
    if not path.is_file():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines(keepends=True) if line.endswith(b"\n")]


def test_killed_eval_resumes_without_duplicates(slow_policy, tiny_index, tokenizer_dir, qwen_tokenizer, tmp_path):
    tasks = [QATask(id=f"c{i}", source="nq", question=f"What is the code of item number {i}?", golds=[f"code {i}"])
             for i in range(N)]
    data = write_verl_parquet(tasks, tmp_path / "codes.parquet")
    out = tmp_path / "eval"
    command = [
        sys.executable, "-m", "deepresearcher.cli.main", "eval", "--data", str(data), "--out", str(out),
        "--set", f"agent.policy=openai:{slow_policy.base_url}", "--set", "agent.policy_model=scripted",
        "--set", "agent.tokenizer=qwen2.5", "--set", f"search.index={tiny_index}", "--set", f"cache_dir={tokenizer_dir}",
        "--set", "eval.concurrency=1", "--set", "cache.mode='off'",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    path = out / "trajectories.jsonl"
    deadline = time.monotonic() + 120
    while len(_lines(path)) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    done_before = {r["task_id"] for r in _lines(path)}
    assert 3 <= len(done_before) < N, "the eval was not killed mid-way"
    assert not (out / "metrics.json").exists()

    rerun = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    records = _lines(path)
    ids = [r["task_id"] for r in records]
    assert sorted(ids) == sorted(f"nq_{t.id}" for t in tasks), "every question once, none twice"
    assert all(r["em"] == 1.0 for r in records)
    # questions finished before the kill were not asked again: 2 requests each (search, then answer)
    for task in tasks:
        asked = slow_policy.requests.get(task.question, 0)
        assert asked == 2 if f"nq_{task.id}" in done_before else asked in (2, 3, 4)
    metrics = orjson.loads((out / "metrics.json").read_bytes())
    assert metrics["benchmarks"]["nq"]["questions"] == N and metrics["benchmarks"]["nq"]["em"] == 1.0
    assert f"{N - len(done_before)} rollouts run now" in rerun.stdout.replace("\n", " ")
