"""The examples in the data modules' docstrings are true."""

from __future__ import annotations

import doctest

import pytest

import deepresearcher.data.formats
import deepresearcher.data.mix


@pytest.mark.parametrize("module", [deepresearcher.data.formats, deepresearcher.data.mix])
def test_doctests(module) -> None:
    """Docstring examples run and pass."""
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
