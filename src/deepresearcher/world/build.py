"""Build a world to disk: ``pages.jsonl``, ``tasks/{train,dev,test}.jsonl``, ``knowledge.jsonl``, ``manifest.json``.

Same seed and size give byte-identical files on any machine: one seeded ``random.Random`` drives
everything, iteration orders are fixed, and nothing time- or machine-dependent is written.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import orjson

from deepresearcher.errors import DataError
from deepresearcher.world.knowledge import generate_knowledge
from deepresearcher.world.names import NameForge
from deepresearcher.world.pages import render_pages
from deepresearcher.world.tasks import Task, generate_tasks, split_tasks

# Bump when the generator's output changes: the default world's cache folder is named by it (so it is
# rebuilt), and a manifest records it (worlds of older versions stay loadable; their tasks differ).
# 2: balanced answers (yes/no 50/50, no year caps, 30 countries, answer shares capped).
# 3: tasks name their gold answers `golds`, as every other task of the package does.
# 4: contested facts on three unreliable sites (blogs, a forum, a trivia site), the unreliable page ranked first
#    on every other one; hops record the pages that contradict them; inverse statements are evidence too.
GENERATOR_VERSION = 4
SPLITS = ("train", "dev", "test")


def _write_jsonl(path: Path, rows) -> None:
    with path.open("wb") as out:
        for row in rows:
            out.write(orjson.dumps(row) + b"\n")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_world(seed: int, size: str, out_dir: str | Path, names_seed: int | None = None,
                background_sentences: int = 2) -> dict:
    """Generate the world for ``(seed, size)`` into ``out_dir`` and return its manifest.

    With ``names_seed``, entity names come from that seed alone: worlds with the same ``names_seed``
    and size share every name but not the facts, which is how training data is made that can only be
    answered by reading the tools' output, never by recalling an earlier world.
    ``background_sentences`` (0-2) is the prose between an article's lead and its infobox; fewer
    sentences change those articles only (every other page and every task stay byte-identical).

    The directory is written next to its final place and renamed into it, so a reader never sees a
    half-built world and two concurrent builds of the same world do not corrupt each other.
    """
    out_dir = Path(out_dir)
    rng = random.Random(f"deepresearcher-world/{seed}/{size}")
    names = NameForge(random.Random(f"deepresearcher-names/{names_seed}/{size}")) if names_seed is not None else None
    kb = generate_knowledge(rng, size, names=names)
    handle_forge = NameForge(random.Random(f"handles/{seed}"))
    pages, evidence = render_pages(kb, rng, [handle_forge.handle() for _ in range(12)], background_sentences)
    prefix = f"w{seed}{size[0]}" + (f"n{names_seed}" if names_seed is not None else "")
    splits = split_tasks(generate_tasks(kb, evidence, rng), prefix=prefix)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        _write_jsonl(tmp / "pages.jsonl", ({"url": p.url, "title": p.title, "html": p.html, "layout": p.layout}
                                           for p in pages))
        (tmp / "tasks").mkdir()
        for split in SPLITS:
            _write_jsonl(tmp / "tasks" / f"{split}.jsonl", (t.to_dict() for t in splits[split]))
        _write_jsonl(tmp / "knowledge.jsonl", (
            {"subject": f.subject, "relation": f.relation, "value": f.value, "hidden": f.hidden,
             "wrong_value": f.wrong_value} for f in kb.facts.values()))
        manifest = {
            "generator_version": GENERATOR_VERSION,
            "seed": seed,
            "size": size,
            "names_seed": names_seed,
            **({"background_sentences": background_sentences} if background_sentences != 2 else {}),
            "pages": len(pages),
            "entities": dict(sorted(Counter(e.kind for e in kb.entities.values()).items())),
            "tasks": {s: dict(sorted(Counter(t.type for t in splits[s]).items())) for s in SPLITS},
            "files": {name: _sha256(tmp / name) for name in
                      ("pages.jsonl", "knowledge.jsonl", *(f"tasks/{s}.jsonl" for s in SPLITS))},
        }
        (tmp / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def load_manifest(world_dir: str | Path) -> dict:
    path = Path(world_dir) / "manifest.json"
    if not path.is_file():
        raise DataError(f"{world_dir} is not a built world (no manifest.json); run `deepresearcher world build`.")
    return orjson.loads(path.read_bytes())


def load_tasks(world_dir: str | Path, split: str) -> list[Task]:
    """The tasks of one split of a built world."""
    if split not in SPLITS:
        raise DataError(f"Unknown split {split!r}; choose one of {', '.join(SPLITS)}.")
    path = Path(world_dir) / "tasks" / f"{split}.jsonl"
    if not path.is_file():
        raise DataError(f"{path} does not exist; is {world_dir} a built world?")
    with path.open("rb") as lines:
        return [Task.from_dict(orjson.loads(line)) for line in lines if line.strip()]


def iter_pages(world_dir: str | Path):
    """Stream the pages of a built world as dicts with url, title, html."""
    with (Path(world_dir) / "pages.jsonl").open("rb") as lines:
        for line in lines:
            if line.strip():
                yield orjson.loads(line)
