"""Running the endpoint: ``deepresearcher serve --policy`` as a process, and the loopback server a trainer starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from endpoint_testing import Recording

from deepresearcher.config import load_config
from deepresearcher.endpoint import ThreadedServer, create_app, endpoint_for, episode_base_url
from deepresearcher.testing.handlers import wait_healthy

pytest.importorskip("torch")
openai = pytest.importorskip("openai")


def get_json(url: str) -> dict:
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=30) as response:
        return json.loads(response.read())


def _serve(policy: Path, *options: str) -> tuple[subprocess.Popen, str, list[str]]:
    """``deepresearcher serve --policy POLICY`` in a process of its own: the process, its base URL, what it printed."""
    command = [sys.executable, "-m", "deepresearcher.cli.main", "serve", "--policy", str(policy), "--port", "0", *options]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    seen = []
    assert process.stdout is not None
    for line in process.stdout:
        seen.append(line)
        if line.startswith("deepresearcher policy "):
            return process, line.rsplit(" at ", 1)[1].strip(), seen
    pytest.fail("serve --policy did not print its URL:\n" + "".join(seen))


def _stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)  # uvicorn shuts down, then re-raises the signal it caught
    assert process.wait(60) in (0, -signal.SIGTERM)


def test_a_runs_model_is_served_with_the_runs_config(tiny_model_dir, tmp_path):
    """`serve --policy runs/X/model` without --config serves it as run X trained it: with runs/X/config.yaml
    (here a 3-token turn limit), and says so."""
    run = tmp_path / "runs" / "quickstart"
    run.mkdir(parents=True)
    (run / "model").symlink_to(tiny_model_dir)
    (run / "config.yaml").write_text(f"agent:\n  max_tokens_per_turn: 3\ncache_dir: {tmp_path / 'cache'}\n")
    process, base_url, seen = _serve(run / "model")
    try:
        assert any(line.startswith(f"config: {run / 'config.yaml'} (the run that trained") for line in seen), seen
        sdk = openai.OpenAI(base_url=episode_base_url(base_url.removesuffix("/v1"), "run"), api_key="unused",
                            max_retries=0)
        reply = sdk.chat.completions.create(model="policy", messages=[{"role": "user", "content": "Hi?"}])
        assert reply.usage.completion_tokens <= 3
    finally:
        _stop(process)


def test_serve_policy_prints_its_url_and_answers_there(tiny_model_dir, tmp_path):
    process, base_url, _ = _serve(tiny_model_dir, "--set", f"cache_dir={tmp_path / 'cache'}",
                                  "--set", "agent.max_tokens_per_turn=6")
    try:
        assert base_url.endswith("/v1")
        server = base_url.removesuffix("/v1")
        wait_healthy(server)
        sdk = openai.OpenAI(base_url=episode_base_url(server, "cli"), api_key="unused", max_retries=0)
        reply = sdk.chat.completions.create(model=str(tiny_model_dir), messages=[{"role": "user", "content": "Hi?"}])
        assert reply.usage.completion_tokens <= 6 and reply.choices[0].finish_reason in ("stop", "length")
        assert [m.id for m in sdk.models.list().data] == [str(tiny_model_dir)]
        record = get_json(f"{server}/episodes/cli")
        assert record["requests"] == 1 and record["drifts"] == 0
        (trajectory,) = record["trajectories"]
        policy = [s for s in trajectory["segments"] if s["source"] == "policy"]
        assert len(policy) == 1 and len(policy[0]["token_ids"]) == reply.usage.completion_tokens
        assert len(policy[0]["logprobs"]) == reply.usage.completion_tokens
    finally:
        _stop(process)


async def test_a_trainer_serves_its_policy_on_a_thread_and_takes_each_episode(tiny_model_dir, tmp_path):
    """``endpoint_for(training=True)``: the agent's layout (the project's system turn when the client sends none,
    ``<think>`` prefilled), sampling forced to ``agent.temperature`` and episodes limited to ``agent.max_turns``."""
    from deepresearcher.inference.engine import LocalEngine

    config = load_config(overrides=[f"cache_dir={tmp_path}", "agent.max_turns=2", "agent.temperature=0.6",
                                    "agent.max_tokens_per_turn=5"])
    engine = LocalEngine.from_pretrained(str(tiny_model_dir), batch_wait_s=0.01, seed=0)
    generator = Recording(engine)
    endpoint = endpoint_for(config, generator, engine.tokenizer, model_name="policy", training=True)
    with ThreadedServer(create_app(endpoint)) as url:
        sdk = openai.OpenAI(base_url=episode_base_url(url, "task-7/0"), api_key="unused", max_retries=0)
        messages = [{"role": "user", "content": "Who founded Acme Works?"}]
        first = sdk.chat.completions.create(model="policy", messages=messages, temperature=0.0)
        messages += [first.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "obs"}]
        sdk.chat.completions.create(model="policy", messages=messages)
        with pytest.raises(openai.BadRequestError) as limit:
            sdk.chat.completions.create(model="policy", messages=messages)
        assert limit.value.code == "turn_limit_reached"
    (trajectory,) = endpoint.finish("task-7/0")
    prompt = engine.tokenizer.decode(trajectory.prompt_ids)
    assert prompt.startswith("<|im_start|>system\n## Background information") and prompt.endswith("<think>")
    assert sum(s.source == "policy" for s in trajectory.segments) == 2
    assert trajectory.metadata["drifts"] == 0 and trajectory.task_id == "task-7/0"
    assert [c.params.temperature for c in generator.calls] == [0.6, 0.6], "the agent's temperature=0 is overridden"
    await engine.aclose()


def test_serve_policy_mistakes_are_one_line_errors(tmp_path):
    def serve(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "deepresearcher.cli.main", "serve", *args, "--port", "0",
                               "--set", f"cache_dir={tmp_path}"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "COLUMNS": "200"})

    unknown = serve("--policy", "no-such-model")
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert "agent.policy='no-such-model' is not a policy" in unknown.stderr
    layout = serve("--policy", "smollm2", "--layout", "chatml")
    assert layout.returncode == 2 and "'chatml' is not a layout" in layout.stderr
