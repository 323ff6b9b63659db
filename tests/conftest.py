"""Session-wide test setup: one thread per library, a private cache directory, one built world.

Threads: with another process busy, torch and tantivy collapse under 2 threads, so every test runs
with one. The user's real cache directory is never touched: XDG_CACHE_HOME points into pytest's tmp.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory):
    """Point the platform cache (default world, web cache) at a temporary folder for the whole session."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    yield cache
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture(scope="session")
def small_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small world (seed 7), built and indexed once per session."""
    from deepresearcher.web.backends.local import build_index
    from deepresearcher.world import build_world, iter_pages

    root = tmp_path_factory.mktemp("worlds") / "w7-small"
    build_world(7, "small", root)
    build_index(iter_pages(root), root / "index")
    return root


@pytest.fixture
def world_config(small_world: Path, tmp_path: Path):
    """A config that uses the small world and keeps every cache inside the test's tmp dir."""
    from deepresearcher.config import load_config

    return load_config(overrides=[f"world.dir={small_world}", "world.size=small", f"cache_dir={tmp_path / 'cache'}"])


@pytest.fixture(scope="session")
def chromium():
    """``chromium(profile_dir, *args)``: headless Debian Chromium (``--dump-dom URL``, ``--screenshot``); skips without it."""
    import shutil
    import subprocess

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--virtual-time-budget=3000"]

    def run(profile: Path, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([binary, *flags, f"--user-data-dir={profile}", *args], check=False,
                              capture_output=True, text=True, timeout=120)

    return run
