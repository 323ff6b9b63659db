"""``run_eval`` end to end over a scripted policy server, the real tools and a tiny index: records, reports."""

from __future__ import annotations

import json

import orjson
import pytest

from deepresearcher.config import load_config
from deepresearcher.errors import ConfigError
from deepresearcher.eval.runner import read_records, run_eval
from deepresearcher.testing.openai_server import OpenAIEmulator, Reply


def test_eval_scores_writes_reports_and_resumes(policy_server, qa_file, eval_overrides, make_policy, tmp_path):
    """Four questions: right, partly right, wrong, no answer; the judge is asked only about the non-exact ones."""
    out = tmp_path / "eval"
    def mbe(body: dict) -> Reply:  # the paper's judge replies in JSON
        prompt = body["messages"][-1]["content"]
        if prompt.startswith("A research agent read"):  # grounding: supported unless the answer is Herbert or Saturn
            return Reply(text=str(not ("Answer: Herbert" in prompt or "Answer: Saturn" in prompt)))
        verdict = "correct" if "herbert" in str(body).lower() else "incorrect"
        return Reply(text=f'{{"rationale": "checked", "judgement": "{verdict}"}}')

    with OpenAIEmulator(responder=mbe).running() as judge:
        cfg = load_config(overrides=[
            *eval_overrides,
            "eval.judge.kind=openai", f"eval.judge.base_url={judge.base_url}", "eval.judge.model=judge-emu",
        ])
        result = run_eval(cfg, out, data_file=qa_file, policy=make_policy())
        asked = [r["messages"][-1]["content"] for r in judge.requests]
    judged = [p for p in asked if "pred_answer:" in p]  # MBE; the rest ask whether the observations support the answer
    grounding = [p for p in asked if p.startswith("A research agent read")]
    assert (result.ran, result.total) == (4, 4)
    assert policy_server.seeds == {None}  # greedy: no seed sent
    records = {r["question"]: r for r in read_records(out / "trajectories.jsonl")}
    paris, dune = records["Which city is the capital of France?"], records["Who wrote the novel Dune?"]
    planet, nile = records["What is the largest planet?"], records["Which river flows through Cairo?"]
    assert (paris["em"], paris["judge"], paris["judge_by"]) == (1.0, 1.0, "exact")
    assert (dune["em"], dune["cover_em"], dune["f1"], dune["judge"]) == (0.0, 0.0, pytest.approx(2 / 3), 1.0)
    assert (planet["f1"], planet["judge"], planet["judge_by"]) == (0.0, 0.0, "model")
    assert nile["answer"] is None and nile["termination"] == "max_turns" and nile["judge_by"] == "no_answer"
    assert len(judged) == 2 and any("pred_answer: saturn" in p for p in judged)
    assert len(grounding) == 3 and len(asked) == 5  # the three answers; none for the episode without one
    assert (paris["behaviour"]["grounded"], planet["behaviour"]["grounded"]) == (True, False)
    assert [r["behaviour"]["judged_grounded"] for r in (paris, dune, planet)] == [True, False, False]
    assert dune["behaviour"]["grounded"] is True  # the rule and the judge disagree here
    hits = paris["trajectory"]["turns"][0]["tool_call"]["observation"][0]["web_page_info_list"]
    assert hits[0]["url"] == "https://example.org/paris"

    metrics = json.loads((out / "metrics.json").read_text())
    nq, hotpot = metrics["benchmarks"]["nq"], metrics["benchmarks"]["hotpotqa"]
    assert (nq["em"], nq["judge"], hotpot["em"], hotpot["judge"]) == (0.5, 1.0, 0.0, 0.0)
    assert metrics["average"]["judge"] == pytest.approx(0.5)
    for number in metrics["results"]:
        assert {"metric", "value", "search_backend", "top_k", "reader", "judge_model", "date", "config_hash"} <= set(number)
    used = load_config(out / "config.yaml")  # the resolved config of the eval; the session decodes at eval.temperature
    assert metrics["meta"]["config_hash"] == used.config_hash() == cfg.config_hash()
    assert metrics["meta"]["temperature"] == used.eval.temperature == 0.0 and metrics["meta"]["judge_model"] == "judge-emu"
    md = (out / "report.md").read_text()
    assert "| nq | 2 | 50.0 | 83.3 | 50.0 | 50.0 | 83.3 | 50.0 | 83.3 | 100.0 | 100.0 |" in md and "**average**" in md
    assert (nq["judge_asked"], nq["judge_unparsed"], metrics["meta"]["judge_attempts"]) == (1, 0, 100)
    assert "asked up to 100 times for a verdict; 2 calls, 0 replies without a verdict" in md
    assert "F1 (DeepResearcher)" in md and "EM (SQuAD)" in md and "prompt `deepresearcher`" in md
    hotpot_behaviour = metrics["behaviours"]["hotpotqa"]["all"]
    assert hotpot_behaviour["grounded"] == {"rate": 0.0, "n": 1} and hotpot_behaviour["episodes"]["n"] == 2
    assert "## Research behaviours" in md and "| hotpotqa | 2 | 0% (1) | 100% (1) |" in md and "judge agrees" in md
    assert metrics["behaviours"]["nq"]["all"]["judge_agreement"] == {"rate": 0.5, "n": 2}
    assert "judge-emu" in md and used.config_hash() in md and "top-k 10" in md and "extractive" in md
    html = (out / "report.html").read_text()
    assert "Which river flows through Cairo?" in html and "<script src" not in html and "http" not in html.split("<script")[0].split("<style")[0]

    before = sum(policy_server.requests.values())
    again = run_eval(cfg, out, data_file=qa_file, policy=make_policy())
    assert again.ran == 0 and sum(policy_server.requests.values()) == before
    assert len(read_records(out / "trajectories.jsonl")) == 4


def test_a_torn_last_line_is_cut_and_rerun(policy_server, qa_file, eval_overrides, make_policy, tmp_path):
    """A line torn by a kill is dropped and its rollout runs again; complete lines are kept."""
    out = tmp_path / "eval"
    cfg = load_config(overrides=eval_overrides)
    run_eval(cfg, out, data_file=qa_file, policy=make_policy())
    path = out / "trajectories.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]) + lines[2][: len(lines[2]) // 2])
    result = run_eval(cfg, out, data_file=qa_file, policy=make_policy())
    assert result.ran == 2
    keys = [(r["benchmark"], r["task_id"]) for r in map(orjson.loads, path.read_bytes().splitlines())]
    assert len(keys) == len(set(keys)) == 4


def test_other_settings_refuse_to_resume_into_the_same_folder(policy_server, qa_file, eval_overrides, make_policy, tmp_path):
    out = tmp_path / "eval"
    base = eval_overrides
    run_eval(load_config(overrides=[*base, "eval.limit=1"]), out, data_file=qa_file, policy=make_policy())
    with pytest.raises(ConfigError, match="search.top_k: 10 -> 3"):
        run_eval(load_config(overrides=[*base, "search.top_k=3"]), out, data_file=qa_file, policy=make_policy())
    saved = out / "config.yaml"  # a field another version of deepresearcher added or dropped does not block a resume
    saved.write_text(saved.read_text().replace("agent:\n", "agent:\n  field_of_another_version: 1\n", 1))
    grown = run_eval(load_config(overrides=base), out, data_file=qa_file, policy=make_policy())  # a larger limit resumes
    assert (grown.ran, grown.total) == (2, 4)


def test_samples_give_pass_at_k_and_need_a_temperature(policy_server, qa_file, eval_overrides, make_policy, tmp_path):
    base = eval_overrides
    with pytest.raises(ConfigError, match="temperature"):
        run_eval(load_config(overrides=[*base, "eval.samples=2"]), tmp_path / "a", data_file=qa_file, policy=make_policy())
    result = run_eval(load_config(overrides=[*base, "eval.samples=3", "eval.temperature=1.0", "eval.seed=5"]),
                      tmp_path / "b", data_file=qa_file, policy=make_policy())
    assert result.total == 12
    seeds = sorted({r["seed"] for r in read_records(tmp_path / "b" / "trajectories.jsonl")})
    assert seeds == [5, 6, 7] and policy_server.seeds == {5, 6, 7}  # each sample asked the server for its seed
    nq = result.metrics["benchmarks"]["nq"]
    assert nq["pass@3_em"] == 0.5 and nq["rollouts"] == 6
    assert "pass@3 cover-EM" in (tmp_path / "b" / "report.md").read_text()


def test_world_is_a_benchmark(small_world):
    """`world` reads the synthetic world's test split (its unanswerable tasks keep answerable=False)."""
    from deepresearcher.eval.runner import load_eval_tasks

    cfg = load_config(overrides=[f"world.dir={small_world}", "eval.benchmarks=[world, 'world:dev']"])
    tasks = load_eval_tasks(cfg)
    assert list(tasks) == ["world", "world:dev"]
    assert {t.split for t in tasks["world"]} == {"test"}
    assert {t.source for t in tasks["world:dev"]} == {"world"} and tasks["world:dev"][0].split == "dev"
    assert any(t.metadata["answerable"] is False for t in tasks["world"])


def test_a_data_file_with_none_of_the_asked_benchmarks_is_an_error(tmp_path):
    """`eval --data` on rows without data_source under a config naming benchmarks runs nothing and says why:
    which sources the file holds, which were asked for; exit 2, no eval folder."""
    import subprocess
    import sys

    data = tmp_path / "rows.jsonl"
    data.write_text('{"id": "a", "question": "Who wrote Dune?", "answers": ["Frank Herbert"]}\n')
    config = tmp_path / "eval.yaml"
    config.write_text("eval:\n  benchmarks: [hotpotqa, 2wiki]\n")
    out = tmp_path / "eval"
    done = subprocess.run(
        [sys.executable, "-m", "deepresearcher.cli.main", "eval", "--data", str(data), "--config", str(config),
         "--out", str(out)], capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "\nError:" in done.stderr and "Traceback" not in done.stderr
    message = " ".join(done.stderr.split())
    assert "asks for (hotpotqa, 2wiki)" in message and "rows are from: unknown (rows without a data_source)" in message
    assert not out.exists()


def test_a_world_eval_reports_the_no_tools_baselines_beside_the_policy(world_eval_overrides, small_world, tmp_path):
    """`deepresearcher eval -b world` with a policy that answers "no" to everything: its rows keep the
    answer, golds and tool calls, and the reports put it beside the baselines fitted on the world's
    train split, with its margin."""
    from typer.testing import CliRunner

    from deepresearcher.cli.main import app
    from deepresearcher.eval.baselines import fit_baselines
    from deepresearcher.world import load_tasks

    out = tmp_path / "eval"
    sets = [a for o in world_eval_overrides for a in ("--set", o)]
    shown = CliRunner().invoke(app, ["eval", "--out", str(out), "--limit", "40", *sets])
    assert shown.exit_code == 0, shown.output
    assert "No-tools baselines of world" in shown.output and "| all | 40 |" in shown.output
    records = read_records(out / "trajectories.jsonl")
    assert len(records) == 40 and {r["answer"] for r in records} == {"no"}
    assert all(r["golds"] and r["trajectory"]["turns"][0]["tool_call"]["name"] == "web_search" for r in records)
    tasks = {t.id: t for t in load_tasks(small_world, "test")}
    metrics = json.loads((out / "metrics.json").read_text())
    section = metrics["baselines"]["world"]
    expected = fit_baselines(load_tasks(small_world, "train")).evaluate([tasks[r["task_id"]] for r in records])
    assert section["f1"] == expected.f1 and section["n"]["all"] == 40 and section["n"]["two_page"] >= 1
    assert section["best_uses"] == expected.choice
    no_share = sum(tasks[r["task_id"]].golds == ["no"] for r in records) / 40
    assert section["model_f1"]["all"] == pytest.approx(no_share)
    assert section["margin_over_best"]["all"] == pytest.approx(no_share - expected.f1["best"]["all"])
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert "## No-tools baselines: world" in md and "| all | 40 |" in md and "relation prior" in md
    assert "No-tools baselines: world" in html and "relation prior" in html
    behaviours = metrics["behaviours"]["world"]  # per task type, from the world's labels
    assert set(behaviours) == {tasks[r["task_id"]].type for r in records} | {"all"}
    unanswerable = sum(not tasks[r["task_id"]].answerable for r in records)
    assert behaviours["all"]["abstention_recall"] == {"rate": 0.0, "n": unanswerable} and unanswerable >= 1
    # on world tasks "no" is checkable: only a yes/no question whose two values were read can ground it
    two_page = sum(tasks[r["task_id"]].type == "two_page" for r in records)
    assert behaviours["all"]["grounded"]["n"] == 40 and behaviours["all"]["grounded"]["rate"] <= two_page / 40
    hops = sum(tasks[r["task_id"]].type in ("hop2", "hop3") for r in records)
    assert behaviours["all"]["every_hop_searched"]["n"] == hops >= 1
    assert "## Research behaviours" in md and "| world / hop2 |" in md and "Research behaviours" in shown.output
