"""Fixtures for data tests: the shared real datasets, skipped cleanly where they are absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deepresearcher.data import DATA_DIR_ENV

# The project's sibling folder of real QA datasets (read-only); $DEEPRESEARCHER_DATA_DIR overrides it.
_DEFAULT_SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


@pytest.fixture
def shared_data_dir(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The real datasets folder, exported as $DEEPRESEARCHER_DATA_DIR; skips the test if it is missing."""
    root = Path(os.environ.get(DATA_DIR_ENV) or _DEFAULT_SHARED)
    if not (root / "deepresearcher" / "dev.parquet").is_file():
        pytest.skip(f"shared datasets not found at {root}; set {DATA_DIR_ENV} to run these tests")
    monkeypatch.setenv(DATA_DIR_ENV, str(root))
    return root
