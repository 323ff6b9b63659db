"""Loaders on the real shared dataset files, the registry, and the hub fallback's error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepresearcher.data import (
    BENCHMARKS,
    DATA_DIR_ENV,
    QATask,
    corpus_from_tasks,
    evaluation_tasks,
    get_benchmark,
    load_benchmark,
    load_file,
    load_passages,
    local_data_dir,
    record_to_task,
)
from deepresearcher.errors import DataError

# Every QA file of the shared folder: (path, source passed to the loader, rows, tasks with context).
QA_FILES = [
    ("deepresearcher/dev.parquet", None, 875, 0),
    ("deepresearcher/dev.jsonl", None, 875, 0),
    ("deepresearcher/test.parquet", None, 3197, 0),
    ("deepresearcher/test.jsonl", None, 3197, 0),
    ("nq_open/NQ-open.dev.jsonl", "nq", 3610, 0),
    ("nq_open/NQ-open.efficientqa.dev.1.1.jsonl", "nq", 1800, 0),
    ("triviaqa/deepresearcher_dev.jsonl", None, 125, 0),
    ("triviaqa/deepresearcher_test.jsonl", None, 512, 0),
    ("popqa/deepresearcher_dev.jsonl", None, 125, 0),
    ("popqa/deepresearcher_test.jsonl", None, 512, 0),
    ("hotpotqa/hotpot_dev_distractor_v1_first103.json", "hotpotqa", 103, 103),
    ("hotpotqa/dev_first200.flashrag.jsonl", "hotpotqa", 200, 200),
    ("hotpotqa/dev_qa_only.fireact.json", "hotpotqa", 7405, 0),
    ("hotpotqa/hipporag_hotpotqa_train.json", "hotpotqa", 100, 100),
    ("2wikimultihopqa/dev_first200.flashrag.jsonl", "2wiki", 200, 200),
    ("musique/dev_first200.flashrag.jsonl", "musique", 200, 200),
    ("musique/hipporag_musique_train.json", "musique", 100, 100),
    ("bamboogle/test.csv", "bamboogle", 125, 0),
    ("bamboogle/test.jsonl", "bamboogle", 125, 0),
    ("frames/frames.jsonl", "frames", 824, 0),
    ("frames/frames_test.jsonl", "frames", 724, 0),
    ("frames/frames_train.jsonl", "frames", 100, 0),
]
CORPUS_FILES = [
    ("hotpotqa/hipporag_hotpotqa_train_corpus.json", 994),
    ("musique/hipporag_musique_train_corpus.json", 1890),
    ("2wikimultihopqa/hipporag_2wikimultihopqa_corpus.json", 6119),
    ("wikipedia_vital_l4_en/summaries_en-us.json", 10033),
]


@pytest.mark.parametrize(("rel", "source", "rows", "with_context"), QA_FILES)
def test_every_shared_qa_file_loads(shared_data_dir: Path, rel: str, source: str | None, rows: int,
                                    with_context: int) -> None:
    """Each file loads whole into valid tasks with unique ids, and shipped paragraphs come along."""
    tasks = load_file(shared_data_dir / rel, source=source)
    assert len(tasks) == rows
    assert len({t.id for t in tasks}) == rows
    assert all(t.question and t.golds for t in tasks)
    assert sum(bool(t.context) for t in tasks) == with_context


@pytest.mark.parametrize(("rel", "rows"), CORPUS_FILES)
def test_every_shared_corpus_file_loads(shared_data_dir: Path, rel: str, rows: int) -> None:
    """Passage corpora load as titled, non-empty paragraphs."""
    passages = load_passages(shared_data_dir / rel)
    assert len(passages) == rows
    assert all(p.text and p.title for p in passages)


def test_deepresearcher_dev_parquet_validates_all_875(shared_data_dir: Path) -> None:
    """All 875 rows of the paper's dev parquet become tasks: 125 per source, aliases split, ids kept."""
    tasks = load_benchmark("deepresearcher", "dev")
    assert len(tasks) == 875
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.source] = counts.get(task.source, 0) + 1
    assert counts == {s: 125 for s in ["tq", "nq", "hotpotqa", "2wiki", "musique", "popqa", "bamboogle"]}
    turkey = next(t for t in tasks if t.id == "tq_qg_3477")
    assert turkey.question.startswith("Lasting from 1299 to 1922")
    assert "turkey" in turkey.golds and len(turkey.golds) == 26
    assert all(t.split == "dev" for t in tasks)


def test_parquet_and_flat_jsonl_agree(shared_data_dir: Path) -> None:
    """The verl parquet and its flattened JSONL copy yield identical tasks."""
    parquet = load_file(shared_data_dir / "deepresearcher/test.parquet")
    flat = load_file(shared_data_dir / "deepresearcher/test.jsonl")
    assert [t.model_dump() for t in parquet] == [t.model_dump() for t in flat]


def test_registry_names_and_splits(shared_data_dir: Path) -> None:
    """Every benchmark loads its DeepResearcher test/dev split by name or alias, with the paper's sizes."""
    sizes = {"nq": 512, "tq": 512, "hotpotqa": 512, "2wiki": 512, "musique": 512, "popqa": 512, "bamboogle": 125}
    for name, size in sizes.items():
        tasks = load_benchmark(name, "test")
        assert len(tasks) == size and {t.source for t in tasks} == {name} and {t.split for t in tasks} == {"test"}
        assert len(load_benchmark(name, "dev")) == 125
    first_five = [t.id for t in load_benchmark("tq", "test")[:5]]
    assert [t.id for t in load_benchmark("triviaqa", "test", limit=5)] == first_five
    assert get_benchmark("2WikiMultihopQA").name == "2wiki"
    assert len(load_benchmark("frames", "test")) == 824
    assert len(load_benchmark("nq", "open_dev", limit=10)) == 10


def test_multihop_context_and_evidence(shared_data_dir: Path) -> None:
    """HotpotQA's distractor paragraphs keep titles, joined sentences and the two supporting flags."""
    task = load_benchmark("hotpotqa", "distractor_dev")[0]
    assert task.id == "hotpotqa_5a8b57f25542995d1e6f1371" and task.golds == ["yes"]
    assert len(task.context) == 10
    supporting = {p.title for p in task.context if p.supporting}
    assert supporting == {"Scott Derrickson", "Ed Wood"}
    derrickson = next(p for p in task.context if p.title == "Scott Derrickson")
    assert derrickson.text.startswith("Scott Derrickson (born July 16, 1966) is an American director")
    assert "producer. He lives" in derrickson.text  # sentences joined with one space
    assert task.metadata == {"type": "comparison", "level": "hard"}
    wiki = load_benchmark("2wiki", "flashrag_dev")[0]
    assert wiki.golds == ["Małgorzata Braunek"]
    assert {p.title for p in wiki.context if p.supporting} == {"Polish-Russian War (film)", "Xawery Żuławski"}
    musique = load_benchmark("musique", "hipporag_train")[0]
    assert musique.golds == ["G. Stanley Hall", "Stanley Hall"]  # answer + answer_aliases
    assert len(musique.context) == 20 and sum(bool(p.supporting) for p in musique.context) == 2
    assert len(corpus_from_tasks(load_benchmark("hotpotqa", "distractor_dev"))) > 900


def test_path_argument_filters_mixed_files(shared_data_dir: Path) -> None:
    """A DeepResearcher file given by path yields only the named benchmark's rows."""
    tasks = load_benchmark("bamboogle", "test", path=shared_data_dir / "deepresearcher/test.parquet")
    assert len(tasks) == 125 and tasks[0].id.startswith("Bamboogle_")


def test_evaluation_tasks_cover_every_eval_split(shared_data_dir: Path) -> None:
    """The dedup target holds every local evaluation question and no training file."""
    questions = {t.question for t in evaluation_tasks()}
    assert "Who was president of the United States in the year that Citibank was founded?" in questions
    train = load_benchmark("musique", "hipporag_train")
    assert not any(t.question in questions for t in train)


def test_hub_formats_convert() -> None:
    """Hub-shaped records (TriviaQA's answer dict, PopQA's JSON list, HF HotpotQA's dict context) convert."""
    tq = record_to_task({"question_id": "tc_1", "question": "Q?", "answer": {"value": "Paris", "aliases": ["Paree"]}},
                        source="triviaqa")
    assert (tq.id, tq.source, tq.golds) == ("tq_tc_1", "tq", ["Paris", "Paree"])
    pop = record_to_task({"id": 7, "question": "Q?", "possible_answers": '["a", "b"]'}, source="popqa")
    assert pop.golds == ["a", "b"] and pop.id == "popqa_7"
    hot = record_to_task({"id": "x", "question": "Q?", "answer": "A", "type": "bridge",
                          "supporting_facts": {"title": ["T1"], "sent_id": [0]},
                          "context": {"title": ["T1", "T2"], "sentences": [["One.", " Two."], ["Three."]]}},
                         source="hotpot_qa")
    assert [(p.title, p.text, p.supporting) for p in hot.context] == [("T1", "One. Two.", True),
                                                                       ("T2", "Three.", False)]
    frames = record_to_task({"Prompt": "Q?", "Answer": "A"}, source="frames", row=4)
    assert (frames.id, frames.golds) == ("frames_4", ["A"])
    verl = record_to_task({"data_source": "nq", "prompt": [{"role": "system", "content": "sys"},
                                                             {"role": "user", "content": "Q?"}],
                           "reward_model": {"ground_truth": {"target": ["a", "b"]}}})
    assert verl.question == "Q?" and verl.golds == ["a", "b"]


def test_bad_data_is_reported_with_its_row(tmp_path: Path) -> None:
    """A record without answers, or broken JSON, names the file and row to fix."""
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"question": "ok?", "answer": ["x"]}) + "\n" + json.dumps({"question": "none"}) + "\n")
    with pytest.raises(DataError, match=r"bad.jsonl row 1"):
        load_file(path, source="nq")
    path.write_text('{"question": "x", "answer": ["y"]}\n{broken\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2"):
        load_file(path, source="nq")
    (tmp_path / "tasks.xml").write_text("<tasks/>")
    with pytest.raises(DataError, match="unknown file type"):
        load_file(tmp_path / "tasks.xml")
    with pytest.raises(DataError, match="known: nq"):
        load_benchmark("squad")
    with pytest.raises(DataError, match="no split 'validation'"):
        load_benchmark("nq", "validation")


def test_the_data_folder_is_the_flag_then_the_variable_then_shared_datasets_beside_the_repository(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One resolver for every command and test: run from anywhere inside a checkout, the datasets in
    ../shared/datasets beside it are found without configuration."""
    shared = tmp_path / "shared" / "datasets"
    shared.mkdir(parents=True)
    (tmp_path / "checkout" / "src").mkdir(parents=True)
    (tmp_path / "checkout" / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    monkeypatch.chdir(tmp_path / "checkout" / "src")
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert local_data_dir() == shared
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "elsewhere"))
    assert local_data_dir() == tmp_path / "elsewhere"
    assert local_data_dir(tmp_path / "flag") == tmp_path / "flag"


def test_missing_local_data_says_what_to_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without local files and with the hub disabled, the error names the env var and the file looked for."""
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(DataError, match=rf"{DATA_DIR_ENV}.*") as info:
        load_benchmark("nq", "test", hub=False)
    assert "deepresearcher/test.parquet" in str(info.value)


def test_hub_unreachable_fails_clearly(tmp_path: Path) -> None:
    """With the hub unreachable, loading a hub split raises one DataError that says how to load locally."""
    code = (
        "from deepresearcher.data import load_benchmark\n"
        "from deepresearcher.errors import DataError\n"
        "try:\n    load_benchmark('nq', 'train')\nexcept DataError as e:\n    print('DATAERROR', e)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           DATA_DIR_ENV: str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "DATAERROR" in out.stdout, out.stderr[-2000:]
    assert "RUC-NLPIR/FlashRAG_datasets" in out.stdout and DATA_DIR_ENV in out.stdout


def test_every_registered_split_has_a_source() -> None:
    """Each benchmark split is reachable locally or on the hub, and names never collide."""
    names = [n for b in BENCHMARKS.values() for n in (b.name, *b.aliases)]
    assert len(names) == len(set(names))
    for bench in BENCHMARKS.values():
        assert bench.splits and all(bench.local.get(s) or s in bench.hub for s in bench.splits)
    assert isinstance(QATask(id="a", source="nq", question="q", golds=[1988]).golds[0], str)


def test_datasets_path_reads_a_local_dataset_folder(tmp_path: Path) -> None:
    """The hub code path (``datasets.load_dataset``) works end to end on a local FlashRAG-format folder."""
    folder = tmp_path / "flashrag_nq"
    folder.mkdir()
    rows = [{"id": f"test_{i}", "question": f"Question {i}?", "golden_answers": [f"a{i}", f"b{i}"]} for i in range(5)]
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = (
        "import json\n"
        "from deepresearcher.data import HubSplit, load_hub\n"
        f"tasks = load_hub(HubSplit({str(folder)!r}, None, 'test'), source='nq', split='test', limit=3)\n"
        "print(json.dumps([[t.id, t.golds] for t in tasks]))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [["nq_test_0", ["a0", "b0"]], ["nq_test_1", ["a1", "b1"]],
                                                             ["nq_test_2", ["a2", "b2"]]]
