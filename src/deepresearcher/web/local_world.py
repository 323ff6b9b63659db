"""The default world on disk: built and indexed on first use, kept in the user's cache directory.

This is what lets ``search``, ``research``, ``train`` and ``quickstart`` run with no setup step and no
flags. A file lock makes concurrent first uses (several processes, parallel tests) build it once.
"""

from __future__ import annotations

import fcntl
import logging
from contextlib import contextmanager
from pathlib import Path

from deepresearcher.config import Config
from deepresearcher.web.backends.local import INDEX_FORMAT, index_format
from deepresearcher.web.backends.local_build import build_index
from deepresearcher.world import GENERATOR_VERSION, build_world, iter_pages

logger = logging.getLogger(__name__)


def world_dir(config: Config) -> Path:
    """Where the configured world lives: ``world.dir``, or a cache folder keyed by seed, size and version."""
    if config.world.dir is not None:
        return Path(config.world.dir)
    names = f"-names{config.world.names_seed}" if config.world.names_seed is not None else ""
    background = f"-bg{config.world.background_sentences}" if config.world.background_sentences != 2 else ""
    name = f"seed{config.world.seed}-{config.world.size}{names}{background}-v{GENERATOR_VERSION}"
    return config.resolved_cache_dir() / "worlds" / name


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_world(config: Config) -> Path:
    """The configured world's directory, with ``pages.jsonl``, tasks and ``index/``; built if missing."""
    root = world_dir(config)
    if (root / "manifest.json").is_file() and index_format(root / "index") == INDEX_FORMAT:
        return root
    with _locked(root.parent / f".{root.name}.lock"):
        if not (root / "manifest.json").is_file():
            logger.info("building world seed=%s size=%s in %s", config.world.seed, config.world.size, root)
            build_world(config.world.seed, config.world.size, root, names_seed=config.world.names_seed,
                        background_sentences=config.world.background_sentences)
        if index_format(root / "index") != INDEX_FORMAT:  # missing, or built by an older deepresearcher
            logger.info("indexing %s", root)
            build_index(iter_pages(root), root / "index")
    return root
