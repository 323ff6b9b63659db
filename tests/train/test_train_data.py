"""Training on any question set (``train.data``): sources, ratios, environments, and real runs on real questions.

The end-to-end tests drive the CLI with the paper's recipe and a tiny model: GRPO on DeepResearcher's verl
parquet (a generated one always, the shipped one when ../shared has it) against an offline corpus index,
SFT on saved trajectories, and GRPO after it against a loopback Serper emulator whose search calls prove the
environment followed the data.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepresearcher.cli.main import app
from deepresearcher.config import DataSource, load_config
from deepresearcher.errors import ConfigError

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "paper-qwen2.5-7b.yaml"
SHIPPED = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "deepresearcher" / "dev.parquet"

FACTS = {  # question -> (answer, page title, page text)
    "What is the capital of Norland?": ("Vesk", "Norland", "Norland is a country. Its capital is Vesk."),
    "Who founded Acme Works?": ("Alice Brown", "Acme Works", "Acme Works was founded by Alice Brown in 1921."),
    "In which year was Alice Brown born?": ("1901", "Alice Brown", "Alice Brown was born in 1901 in Vesk."),
    "Which river flows through Vesk?": ("Ostra", "Vesk", "Vesk lies on the river Ostra."),
}


def _pages() -> list[dict[str, str]]:
    return [{"url": f"https://en.wikipedia.org/wiki/{title.replace(' ', '_')}", "title": title,
             "html": f"<html><head><title>{title}</title></head><body><p>{text}</p></body></html>"}
            for _, title, text in FACTS.values()]


@pytest.fixture(scope="module")
def qa(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real-format question files (verl parquet, {question, golds} JSONL) and an `index build` corpus index."""
    from deepresearcher.data import QATask, write_verl_parquet
    from deepresearcher.web.backends.local_build import build_index, read_corpus

    root = tmp_path_factory.mktemp("qa")
    tasks = [QATask(id=f"hotpotqa_{i}", source="hotpotqa" if i % 2 else "2wiki", question=q, golds=[a], split="train")
             for i, (q, (a, _, _)) in enumerate(FACTS.items())]
    write_verl_parquet(tasks, root / "train.parquet")
    (root / "questions.jsonl").write_text("".join(json.dumps({"question": q, "golds": [a]}) + "\n"
                                                  for q, (a, _, _) in FACTS.items()))
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"url": p["url"], "title": p["title"], "text": p["html"]}) + "\n"
                              for p in _pages()))
    build_index(read_corpus(corpus), root / "index")
    return {"parquet": root / "train.parquet", "jsonl": root / "questions.jsonl", "index": root / "index"}


def _tiny_run(tmp: Path, name: str) -> list[str]:
    """Overrides that make the paper's recipe a 2-step CPU run of the tiny model (no vLLM, no bf16). The tiny
    from-scratch model reads the native protocol's compact observations, not the original's (its faithful
    run is tests/train/test_paper_recipe.py), and no held-out set unless a test names one."""
    return [
        "--set", "agent.protocol=native", "--set", "browse.reader=extractive", "--set", "train.eval_data=null",
        "--set", "train.use_vllm=false", "--set", "train.bf16=false", "--set", "train.gradient_checkpointing=false",
        "--set", "train.max_steps=2", "--set", "train.group_size=2", "--set", "train.prompts_per_step=2",
        "--set", "train.micro_batch_size=2", "--set", "train.save_every=10", "--set", "train.sample_trajectories=4",
        "--set", "train.learning_rate=1e-3", "--set", "train.compact_prompt=true",
        "--set", f"train.runs_dir={tmp / 'runs'}", "--set", f"train.run_name={name}",
        "--set", "agent.max_turns=2", "--set", "agent.max_tokens_per_turn=12", "--set", "agent.context_budget=1024",
        "--set", "agent.max_concurrent_generations=8", "--set", "agent.max_concurrent_tools=8",
        "--set", "browse.observation_format=compact", "--set", "search.top_k=2",
        "--set", f"cache_dir={tmp / 'cache'}", "--set", f"cache.path={tmp / 'web-cache.sqlite'}",
    ]


def _invoke(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    return result.output


def _samples(run: Path) -> list[dict]:
    return [json.loads(line) for path in sorted((run / "samples").glob("step_*.jsonl"))
            for line in path.read_text().splitlines()]


# ------------------------------------------------------------------------------------------------ config


def test_data_sources_parse_from_the_command_line_and_yaml() -> None:
    assert DataSource.parse("hotpotqa:train=3").model_dump(exclude_defaults=True) == {
        "kind": "benchmark", "name": "hotpotqa", "split": "train", "ratio": 3.0}
    assert DataSource.parse("world:dev") == DataSource(kind="world", split="dev")
    assert DataSource.parse("data/train.parquet=2") == DataSource(kind="file", path=Path("data/train.parquet"), ratio=2)
    assert DataSource.parse("mix.jsonl").kind == "file"
    config = load_config(None, ["train.data=[nq:train=1, {kind: file, path: x.parquet, ratio: 3}]"])
    assert [(s.kind, s.ratio) for s in config.train.data] == [("benchmark", 1.0), ("file", 3.0)]
    assert load_config(None).train.data == [DataSource(kind="world")]
    with pytest.raises(ConfigError, match="ratio after '=' must be a number"):
        DataSource.parse("nq:train=lots")
    with pytest.raises(ConfigError, match="a file source needs `path`"):
        load_config(None, ["train.data=[{kind: file}]"])
    with pytest.raises(ConfigError, match="a benchmark source needs `name`"):
        load_config(None, ["train.data=[{kind: benchmark}]"])


def test_the_paper_recipe_trains_on_the_1_1_3_3_mix_with_serper() -> None:
    config = load_config(RECIPE)
    assert config.search.backend == "serper"
    assert [(s.kind, s.name, s.split, s.ratio) for s in config.train.data] == [
        ("benchmark", "nq", "train", 1), ("benchmark", "tq", "train", 1),
        ("benchmark", "hotpotqa", "train", 3), ("benchmark", "2wiki", "train", 3)]
    assert "build-mix" not in RECIPE.read_text(), "the header names only commands that exist"


def test_real_questions_need_a_real_environment(qa: dict[str, Path]) -> None:
    """Real questions on the default local backend would search the synthetic world: refused, with the fix."""
    result = CliRunner().invoke(app, ["train", "--data", str(qa["jsonl"]), "--dry-run"])
    assert isinstance(result.exception, ConfigError)
    assert "real questions need a real environment" in str(result.exception) and "eval-corpus" in str(result.exception)


def test_world_and_real_questions_share_a_run_only_when_each_names_its_environment(
        qa: dict[str, Path], tmp_path: Path) -> None:
    from deepresearcher.train.tasks import task_sets

    base = [f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", f"search.index={qa['index']}"]
    mixed = load_config(None, [*base, f"train.data=[world, {qa['jsonl']}=2]"])
    with pytest.raises(ConfigError, match="each source must say which environment serves it"):
        task_sets(mixed)
    data = (f"train.data=[{{kind: world, environment: world}}, "
            f"{{kind: file, path: {qa['jsonl']}, ratio: 2, environment: search}}]")
    config = load_config(None, [*base, "train.sft.num_tasks=5", data])
    sets = task_sets(config)
    assert sets.environments[-1] is None and len(sets.environments) == 2  # the world's index, then the search backend
    real = [t for t in sets.grpo if t["question"] in FACTS]
    assert len(real) == len(FACTS) and {t["world"] for t in real} == {1}
    assert {t["world"] for t in sets.grpo if t["question"] not in FACTS} == {0}
    assert len(sets.grpo) == 6, "world : file = 1 : 2, as many as the file's 4 questions fill: 2 world tasks + 4"
    assert all(t["world"] == 0 for t in sets.sft + sets.test), "the oracle and the default held-out set are the world's"


def test_sources_mix_at_their_ratios_without_held_out_questions(qa: dict[str, Path], tmp_path: Path) -> None:
    from deepresearcher.train.tasks import task_sets, training_tasks

    extra = tmp_path / "extra.jsonl"
    extra.write_text("".join(json.dumps({"id": f"x{i}", "question": f"Extra question {i}?", "golds": ["x"]}) + "\n"
                             for i in range(3)) + json.dumps({"question": next(iter(FACTS)), "golds": ["Vesk"]}) + "\n")
    overrides = [f"search.index={qa['index']}", f"train.data=[{qa['parquet']}=1, {extra}=2]",
                 f"train.eval_data=[{{kind: file, path: {qa['jsonl']}, limit: 1}}]"]
    sets = task_sets(load_config(None, overrides))
    held_out = next(iter(FACTS))
    assert [t["question"] for t in sets.test] == [held_out]
    assert sets.world_dirs == [] and sets.environments == [None] and {t["world"] for t in sets.grpo} == {0}
    # the held-out question is dropped from both files; 3 parquet and 3 extra questions are left, and the
    # largest 1 : 2 mix they fill is 4 questions (largest remainder: 1 + 3)
    questions = [t["question"] for t in sets.grpo]
    assert held_out not in questions and len(questions) == len(set(questions)) == 4
    assert sum(q.startswith("Extra") for q in questions) == 3
    assert {t["source"] for t in sets.grpo if t["question"].startswith("Extra")} == {"extra"}
    again = training_tasks(load_config(None, overrides))
    assert [t["id"] for t in again] == [t["id"] for t in sets.grpo], "seeded: the same prompts in the same order"


def test_files_that_number_their_rows_alike_get_unique_ids(qa: dict[str, Path], tmp_path: Path) -> None:
    from deepresearcher.train.tasks import task_sets

    for folder, word in (("a", "first"), ("b", "second")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "q.jsonl").write_text(json.dumps({"question": f"The {word} question?", "golds": ["x"]}) + "\n")
    sets = task_sets(load_config(None, [f"search.index={qa['index']}",
                                        f"train.data=[{tmp_path / 'a' / 'q.jsonl'}, {tmp_path / 'b' / 'q.jsonl'}]"]))
    assert sorted(t["id"] for t in sets.grpo) == ["q_0", "q_0#2"]


def test_sft_on_questions_says_the_oracle_exists_only_for_worlds(qa: dict[str, Path]) -> None:
    result = CliRunner().invoke(app, ["sft", "--data", str(qa["parquet"]), "--model", "x", "--dry-run"])
    assert isinstance(result.exception, ConfigError)
    message = str(result.exception)
    assert "scripted oracle exists only for synthetic worlds" in message and "research --save" in message


def test_the_quickstart_refuses_other_questions(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["quickstart", "--set", "train.data=[nq:train]", "--set", f"train.runs_dir={tmp_path}"])
    assert isinstance(result.exception, ConfigError) and "train --data" in str(result.exception)


def test_saved_demonstrations_load_from_research_and_eval_files_and_filter_by_f1(tmp_path: Path) -> None:
    """Both saved shapes load (a trajectory a line; eval's records with it under `trajectory`), as demonstrations
    and as questions; min_f1 keeps the episodes that answered well; a file of something else is reported by record."""
    from deepresearcher.agent.trajectory import Trajectory, TurnRecord
    from deepresearcher.config import RewardConfig
    from deepresearcher.data import load_file
    from deepresearcher.errors import DataError
    from deepresearcher.warmstart.demonstrations import (
        good_enough,
        holds_trajectories,
        load_demonstrations,
    )

    right = Trajectory(task_id="a", question="Capital of Norland?", golds=["Vesk"],
                       turns=[TurnRecord(text="ok</think>\n<answer>Vesk</answer>")])
    wrong = right.model_copy(update={"task_id": "b", "turns": [TurnRecord(text="ok</think>\n<answer>Oslo</answer>")]})
    research = tmp_path / "research.jsonl"
    research.write_bytes(right.to_json_line() + wrong.to_json_line())
    evaluated = tmp_path / "trajectories.jsonl"
    evaluated.write_text("".join(json.dumps({"benchmark": "x", "task_id": t.task_id, "question": t.question,
                                             "golds": t.golds, "trajectory": t.model_dump(mode="json")}) + "\n"
                                 for t in (right, wrong)))
    for path in (research, evaluated):
        assert [(t.id, t.question, t.golds) for t in load_file(path, source="demos")] == [
            ("demos_a", "Capital of Norland?", ["Vesk"]), ("demos_b", "Capital of Norland?", ["Vesk"])], "questions too"
        assert holds_trajectories(path)
        demos = load_demonstrations(path)
        assert [d.task_id for d in demos] == ["a", "b"]
        assert [d.task_id for d in good_enough(demos, 1.0, RewardConfig())] == ["a"]
        assert good_enough(demos, None, RewardConfig()) == demos
    with pytest.raises(DataError, match="F1 >= 1.0"):
        good_enough([wrong], 1.0, RewardConfig())
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"question": "q?", "golds": ["a"]}) + "\n")
    assert not holds_trajectories(questions)
    with pytest.raises(DataError, match="record 0: not a saved trajectory"):
        load_demonstrations(questions)


# ------------------------------------------------------------------------------------------------ runs


@pytest.mark.timeout(300)
@pytest.mark.parametrize("which", ["generated", "shipped"])
def test_paper_recipe_trains_two_steps_on_verl_parquet_against_an_offline_index(
        which: str, qa: dict[str, Path], tiny_model_dir: Path, tmp_path: Path) -> None:
    """The recipe as written, shrunk to a tiny CPU run: 2 GRPO steps on DeepResearcher's parquet questions
    against an offline index (the shipped parquet: the real `eval-corpus` index of ../shared's Wikipedia
    paragraphs); the run directory holds those questions, their rewards and trajectories."""
    from deepresearcher.data import load_file
    from deepresearcher.train.run_dir import read_metrics

    parquet, index = (qa["parquet"], qa["index"]) if which == "generated" else (SHIPPED, None)
    if not parquet.is_file():
        pytest.skip(f"DeepResearcher's shipped parquet is not at {parquet}")
    if index is None:
        from deepresearcher.eval.corpus import build_eval_corpus

        index = build_eval_corpus(tmp_path / "eval-corpus", SHIPPED.parents[1]).index_dir
    questions = {t.question: t.golds for t in load_file(parquet)}
    held_out = []
    if which == "generated":  # and a held-out question, evaluated after training and never trained on
        held_out = ["--set", f"train.eval_data=[{{kind: file, path: {qa['jsonl']}, limit: 1}}]",
                    "--set", "train.eval_every=2"]
    _invoke(["train", "--config", str(RECIPE), "--model", str(tiny_model_dir), "--data", str(parquet),
             *_tiny_run(tmp_path, which), "--set", "search.backend=local", "--set", f"search.index={index}", *held_out])
    run = tmp_path / "runs" / which
    tasks = [json.loads(line) for line in (run / "tasks.jsonl").read_text().splitlines()]
    assert all(questions[t["question"]] == t["golds"] for t in tasks)
    assert len(tasks) == len(questions) - (1 if held_out else 0)
    metrics = read_metrics(run / "metrics.jsonl")
    if held_out:
        (row,) = [json.loads(line) for line in (run / "eval_after_grpo.jsonl").read_text().splitlines()]
        assert row["id"] == "questions_0" and next(iter(FACTS)) not in {t["question"] for t in tasks}
        assert json.loads((run / "heldout.json").read_text())["all"]["n"] == 1
        assert "heldout_f1" in metrics[1] and "heldout_f1" not in metrics[0], "evaluated every 2 steps"
        (live,) = [json.loads(line) for line in (run / "eval_step_00002.jsonl").read_text().splitlines()]
        assert live["id"] == "questions_0" and live["f1"] == metrics[1]["heldout_f1"]
        assert metrics[1]["heldout_behaviour/repeated_calls_n"] == 1 and "behaviour" in live  # research behaviours too
        assert json.loads((run / "heldout_behaviours.json").read_text())["all"]["episodes"]["n"] == 1
    assert [m["step"] for m in metrics] == [1, 2] and all(-1.0 <= m["reward"] <= 1.0 for m in metrics)
    samples = _samples(run)
    assert samples and all(s["question"] in questions and s["golds"] == questions[s["question"]] for s in samples)
    assert all("reward" in s["metadata"] for s in samples)
    assert (run / "model" / "config.json").is_file()


def _record_demonstrations(config, path: Path) -> None:
    """Scripted researchers search the question and answer it, through the real environment: what
    `research --save` writes for a policy that did the same (turns start after the prompt's `<think>`)."""
    from transformers import AutoTokenizer

    from deepresearcher.agent.loop import run_rollouts
    from deepresearcher.agent.tools import ToolBox
    from deepresearcher.agent.trajectory import save_trajectories
    from deepresearcher.generate.scripted import ScriptedGenerator
    from deepresearcher.web import make_environment

    tokenizer = AutoTokenizer.from_pretrained(str(config.train.model))
    tasks = [{"id": f"q{i}", "question": q, "golds": [a]} for i, (q, (a, _, _)) in enumerate(FACTS.items())]
    scripts = {t["question"]: [
        'search</think>\n<tool_call>{"name": "web_search", "arguments": {"query": ["' + t["question"] + '"]}}</tool_call>',
        f"found</think>\n<answer>{t['golds'][0]}</answer>"] for t in tasks}

    async def run() -> list:
        env = make_environment(config)
        try:
            toolbox = ToolBox(env, config)
            out = []
            for task in tasks:
                generator = ScriptedGenerator(tokenizer, scripts[task["question"]])
                out += await run_rollouts([task], generator, toolbox, tokenizer, config.agent)
            return out
        finally:
            await env.aclose()

    trajectories = asyncio.run(run())
    assert all(t.turns[0].tool_call and t.turns[0].tool_call.observation for t in trajectories)
    save_trajectories(path, trajectories)


def _check_replay(config, demos: Path) -> None:
    """Replayed demonstrations keep every recorded turn and observation, in the trained model's template."""
    from transformers import AutoTokenizer

    from deepresearcher.warmstart.demonstrations import (
        load_demonstrations,
        replay_demonstrations,
    )

    tokenizer = AutoTokenizer.from_pretrained(str(config.train.model))
    recorded = load_demonstrations(demos)
    replayed = replay_demonstrations(config, recorded, tokenizer)
    for before, after in zip(recorded, replayed, strict=True):
        assert [t.text for t in after.turns] == [t.text for t in before.turns] and after.answer == before.answer
        observations = [tokenizer.decode(s.token_ids) for s in after.segments if s.source == "env"]
        assert len(observations) == 1 and before.turns[0].tool_call.text in observations[0]


@pytest.mark.timeout(420)
def test_sft_on_saved_trajectories_then_grpo_against_a_loopback_serper(
        qa: dict[str, Path], tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`sft --data demos.jsonl` learns the recorded episodes (replayed, no search needed); GRPO from it with the
    recipe's Serper backend on a loopback emulator searches there: the environment follows the data."""
    from deepresearcher.testing.loopback_web import LoopbackWeb

    with LoopbackWeb(_pages()).running() as web:
        for key, value in web.env_vars.items():
            monkeypatch.setenv(key, value)
        data = web.config_data(tmp_path / "web-cache.sqlite")
        web_overrides = ["--set", f"backends.serper.base_url={web.search.base_url}",
                         "--set", f"backends.serper.api_key_env={data['backends']['serper']['api_key_env']}",
                         "--set", "fetch.allow_private=true"]
        config = load_config(RECIPE, [f"backends.serper.base_url={web.search.base_url}",
                                      f"backends.serper.api_key_env={data['backends']['serper']['api_key_env']}",
                                      "fetch.allow_private=true", f"train.model={tiny_model_dir}",
                                      "train.compact_prompt=true", "agent.protocol=native", "browse.reader=extractive",
                                      "browse.observation_format=compact",
                                      "search.top_k=1", "cache.mode='off'"])
        demos = tmp_path / "demos.jsonl"
        _record_demonstrations(config, demos)
        web.search.reset_counts()
        _check_replay(config, demos)

        sft_out = tmp_path / "sft_model"
        output = _invoke(["sft", "--config", str(RECIPE), "--model", str(tiny_model_dir), "--data", str(demos),
                          "--out", str(sft_out), *_tiny_run(tmp_path, "sft"), "--set", "train.sft.steps=200",
                          "--set", "train.sft.batch_size=4", "--set", "train.sft.learning_rate=1e-2",
                          "--set", "train.sft.warmup_steps=0", "--set", "train.sft.obs_loss_weight=0",
                          "--set", "train.sft.min_f1=1.0"])
        assert web.search.calls == 0, "SFT replays recorded observations; it never searches"
        assert (sft_out / "config.json").is_file() and "SFT: 200 steps" in output

        _invoke(["train", "--config", str(RECIPE), "--model", str(sft_out), "--data", str(qa["jsonl"]),
                 *_tiny_run(tmp_path, "serper"), *web_overrides, "--set", "agent.max_tokens_per_turn=96", "--set", "agent.temperature=0.05",
                 "--set", "search.top_k=1", "--set", "cache.mode='off'"])
    run = tmp_path / "runs" / "serper"
    samples = _samples(run)
    assert {s["question"] for s in samples} <= set(FACTS)
    assert web.search.calls > 0 and set(web.search.queries) & set(FACTS), "GRPO's rollouts must search the emulator"
    observed = [c["text"] for s in samples for turn in s["turns"] if (c := turn["tool_call"])]
    assert any(title in text for text in observed for _, title, _ in FACTS.values()), "the emulator's hits are observed"
    assert max(s["metadata"]["reward"] for s in samples) == 1.0, "the warm start answers from what it found"
