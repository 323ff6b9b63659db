"""The suite runs where CI images turn pytest's cache plugin off (``-p no:cacheprovider``).

The one test that keeps something in pytest's cache (the embedded model's converted weights) must fall back to
its own folder; any test that reads ``request.config.cache`` unguarded fails here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(600)
def test_the_tests_that_use_pytests_cache_run_without_the_cache_plugin(tmp_path: Path) -> None:
    users = [str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
             if "config.cache" in p.read_text(encoding="utf-8") and p.name != Path(__file__).name]
    assert users, "no test uses pytest's cache any more: drop this test"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          f"--basetemp={tmp_path / 'inner'}", *users], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=580)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
