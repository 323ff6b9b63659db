"""Benchmarks by name: where each split lives on disk and on the Hugging Face hub.

``test`` and ``dev`` are always DeepResearcher's own evaluation sets (512 / 125 questions per
benchmark, 125 for Bamboogle), so numbers compare with the paper. Other local splits name the public
file they come from (``open_dev`` is NQ-open's dev, the "NQ test" of open-domain QA papers). ``train``
and ``upstream_*`` come from the hub (FlashRAG's uniform re-export), because no machine-local copy
of the training sets is assumed.

Local files are looked up under ``data_dir``, else ``$DEEPRESEARCHER_DATA_DIR``, else the
``shared/datasets`` folder beside the repository (see :func:`local_data_dir`), laid out like::

    deepresearcher/{test,dev}.parquet     nq_open/NQ-open.dev.jsonl     hotpotqa/...     frames/frames.jsonl
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from deepresearcher.data.formats import canonical_source, load_file, record_to_task
from deepresearcher.data.schema import QATask
from deepresearcher.errors import DataError, MissingDependencyError

__all__ = [
    "BENCHMARKS",
    "DATA_DIR_ENV",
    "Benchmark",
    "HubSplit",
    "evaluation_tasks",
    "get_benchmark",
    "load_benchmark",
    "load_hub",
    "local_data_dir",
]

logger = logging.getLogger(__name__)

DATA_DIR_ENV = "DEEPRESEARCHER_DATA_DIR"
SHARED_DATA_DIR = Path("shared", "datasets")
"""Where the datasets sit beside a checkout when neither a folder nor the variable names them."""
_FLASHRAG = "RUC-NLPIR/FlashRAG_datasets"


@dataclass(frozen=True)
class HubSplit:
    """A split on the Hugging Face hub: repository, config (subset) and split name."""

    repo: str
    config: str | None
    split: str


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: its canonical name, other names, local files and hub splits."""

    name: str
    aliases: tuple[str, ...] = ()
    local: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """split -> candidate paths under the data dir; the first that exists is read."""
    hub: dict[str, HubSplit] = field(default_factory=dict)
    mixed_source: bool = False
    """True when the files hold several benchmarks (DeepResearcher's); rows are then kept whole."""

    @property
    def splits(self) -> list[str]:
        return sorted({*self.local, *self.hub})


def _dr(*extra_test: str, extra_dev: tuple[str, ...] = ()) -> dict[str, tuple[str, ...]]:
    return {
        "test": ("deepresearcher/test.parquet", *extra_test),
        "dev": ("deepresearcher/dev.parquet", *extra_dev),
    }


def _flashrag(config: str, splits: tuple[str, ...] = ("train", "dev", "test")) -> dict[str, HubSplit]:
    names = {"train": "train", "dev": "upstream_dev", "test": "upstream_test"}
    return {names[s]: HubSplit(_FLASHRAG, config, s) for s in splits}


BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in [
        Benchmark(
            "nq",
            ("nq_open", "natural_questions"),
            {
                **_dr(),
                "open_dev": ("nq_open/NQ-open.dev.jsonl",),
                "efficientqa_dev": ("nq_open/NQ-open.efficientqa.dev.1.1.jsonl",),
            },
            _flashrag("nq"),
        ),
        Benchmark(
            "tq",
            ("triviaqa", "trivia_qa"),
            _dr("triviaqa/deepresearcher_test.jsonl", extra_dev=("triviaqa/deepresearcher_dev.jsonl",)),
            _flashrag("triviaqa"),
        ),
        Benchmark(
            "hotpotqa",
            ("hotpot_qa",),
            {
                **_dr(),
                "distractor_dev": ("hotpotqa/hotpot_dev_distractor_v1_first103.json",),
                "flashrag_dev": ("hotpotqa/dev_first200.flashrag.jsonl",),
                "full_dev": ("hotpotqa/dev_qa_only.fireact.json",),
                "hipporag_train": ("hotpotqa/hipporag_hotpotqa_train.json",),
            },
            _flashrag("hotpotqa", ("train", "dev")),
        ),
        Benchmark(
            "2wiki",
            ("2wikimultihopqa",),
            {**_dr(), "flashrag_dev": ("2wikimultihopqa/dev_first200.flashrag.jsonl",)},
            _flashrag("2wikimultihopqa", ("train", "dev")),
        ),
        Benchmark(
            "musique",
            (),
            {
                **_dr(),
                "flashrag_dev": ("musique/dev_first200.flashrag.jsonl",),
                "hipporag_train": ("musique/hipporag_musique_train.json",),
            },
            _flashrag("musique", ("train", "dev")),
        ),
        Benchmark(
            "bamboogle",
            (),
            {**_dr(), "original": ("bamboogle/test.csv", "bamboogle/test.jsonl")},
            {"upstream_test": HubSplit(_FLASHRAG, "bamboogle", "test")},
        ),
        Benchmark(
            "popqa",
            (),
            _dr("popqa/deepresearcher_test.jsonl", extra_dev=("popqa/deepresearcher_dev.jsonl",)),
            {"upstream_test": HubSplit(_FLASHRAG, "popqa", "test")},
        ),
        Benchmark(
            "frames",
            (),
            {
                "test": ("frames/frames.jsonl",),
                "skillorchestra_test": ("frames/frames_test.jsonl",),
                "skillorchestra_train": ("frames/frames_train.jsonl",),
            },
            {"upstream_test": HubSplit("google/frames-benchmark", None, "test")},
        ),
        Benchmark("deepresearcher", ("dr",), _dr(), mixed_source=True),
    ]
}

_BY_ALIAS = {alias: b.name for b in BENCHMARKS.values() for alias in (b.name, *b.aliases)}


def get_benchmark(name: str) -> Benchmark:
    """The benchmark called ``name`` (or one of its aliases); the error lists the known names."""
    key = name.strip().lower()
    found = _BY_ALIAS.get(key) or _BY_ALIAS.get(canonical_source(key))
    if found is None:
        raise DataError(f"Unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}.")
    return BENCHMARKS[found]


def local_data_dir(data_dir: str | Path | None = None) -> Path | None:
    """The local data root: ``data_dir``, else ``$DEEPRESEARCHER_DATA_DIR``, else ``../shared/datasets``
    beside the repository when that folder exists, else None.

    "The repository" is the nearest folder holding ``pyproject.toml`` above the working directory,
    then above this package (an editable install, or a virtual environment inside the checkout).
    """
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env)
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        repository = next((d for d in (start, *start.parents) if (d / "pyproject.toml").is_file()), None)
        if repository is not None and (repository.parent / SHARED_DATA_DIR).is_dir():
            return repository.parent / SHARED_DATA_DIR
    return None


def _local_path(bench: Benchmark, split: str, data_dir: Path | None) -> Path | None:
    if data_dir is None:
        return None
    for candidate in bench.local.get(split, ()):
        if (data_dir / candidate).is_file():
            return data_dir / candidate
    return None


def load_hub(spec: HubSplit, *, source: str, split: str, limit: int | None = None) -> list[QATask]:
    """Tasks of one split through ``datasets.load_dataset`` (a hub id, or a local dataset folder).

    ``datasets`` is imported here, so it stays optional; whatever the hub client raises (offline,
    missing repository, gated) becomes one ``DataError`` that says how to load the data locally.
    """
    where = f"{spec.repo}" + (f" ({spec.config})" if spec.config else "") + f" split {spec.split!r}"
    try:
        import datasets
    except ImportError:
        raise MissingDependencyError(
            f"Loading {source}/{split} from the Hugging Face hub needs `datasets`: pip install datasets"
        ) from None
    try:
        rows = datasets.load_dataset(spec.repo, spec.config, split=spec.split)
    except Exception as exc:  # the hub client raises many types (offline, 404, gated); map them at this boundary
        local = ", ".join(BENCHMARKS[source].local) if source in BENCHMARKS else "none"
        raise DataError(
            f"Could not load {source}/{split} from the Hugging Face hub ({where}): {type(exc).__name__}: {exc}. "
            f"Without network access, download the files elsewhere, put them under a directory and point "
            f"{DATA_DIR_ENV} at it, or pass path=... to load_benchmark. Splits {source} can read from local "
            f"files: {local or 'none'}."
        ) from None
    tasks = []
    for row, record in enumerate(rows):
        try:
            tasks.append(record_to_task(record, source=source, split=split, row=row))
        except ValueError as exc:
            raise DataError(f"{where} row {row}: cannot read this record as a QA task: {exc}") from None
        if limit is not None and len(tasks) >= limit:
            break
    return tasks


def load_benchmark(
    name: str,
    split: str = "test",
    path: str | Path | None = None,
    limit: int | None = None,
    *,
    data_dir: str | Path | None = None,
    hub: bool | None = None,
) -> list[QATask]:
    """Tasks of one benchmark split, from ``path``, the local data dir, or the hub (in that order).

    ``hub=None`` tries local files first and the hub second; ``True`` only the hub; ``False`` only local
    files. A file given by ``path`` may hold several benchmarks (DeepResearcher's parquet): only the
    rows of ``name`` are kept.
    """
    bench = get_benchmark(name)
    only = None if bench.mixed_source else {bench.name}
    if path is not None:
        return load_file(path, source=bench.name, split=split, only_sources=only, limit=limit)
    if split not in bench.splits:
        raise DataError(f"{bench.name} has no split {split!r}; choose one of: {', '.join(bench.splits)}.")
    root = local_data_dir(data_dir)
    if hub is not True:
        local = _local_path(bench, split, root)
        if local is not None:
            return load_file(local, source=bench.name, split=split, only_sources=only, limit=limit)
    if hub is not False and split in bench.hub:
        return load_hub(bench.hub[split], source=bench.name, split=split, limit=limit)
    wanted = " or ".join(bench.local.get(split, ())) or "(no local file for this split)"
    raise DataError(
        f"No local file for {bench.name}/{split}: looked for {wanted} under "
        f"{root if root else f'${DATA_DIR_ENV} (unset, and no ../shared/datasets beside the repository)'}. Set {DATA_DIR_ENV} to your data directory "
        f"or pass path=...; hub splits of {bench.name}: {', '.join(bench.hub) or 'none'}."
    )


def evaluation_tasks(
    data_dir: str | Path | None = None, *, skip: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset()
) -> list[QATask]:
    """Every locally available evaluation question (all non-training splits), for deduplicating training data.

    ``skip`` leaves out (benchmark, split) pairs, e.g. the splits a mix deliberately trains on.
    """
    root = local_data_dir(data_dir)
    skip = {(get_benchmark(name).name, split) for name, split in skip}
    tasks: list[QATask] = []
    for bench in BENCHMARKS.values():
        if bench.mixed_source:  # its rows are every other benchmark's test/dev rows
            continue
        for split in bench.local:
            if "train" in split or (bench.name, split) in skip or _local_path(bench, split, root) is None:
                continue
            tasks.extend(load_benchmark(bench.name, split, data_dir=root, hub=False))
    return tasks
