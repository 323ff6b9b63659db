"""The built package carries what its commands read: recipes, benchmarks and the chat template.

The wheel is built from this checkout and unpacked into a folder outside it; that copy of
deepresearcher (not the checkout's) then resolves a recipe by name and lists the benchmarks from an
unrelated working directory, as a user who installed the package would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def unpacked_wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"  # a copy: building writes build/ and *.egg-info next to the sources
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(source)], check=True, timeout=300, capture_output=True)
    [wheel] = out.glob("deepresearcher-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(out / "site")
    return out / "site", names


def test_wheel_ships_recipes_benchmarks_and_the_chat_template(unpacked_wheel: tuple[Path, list[str]]) -> None:
    _, names = unpacked_wheel
    recipes = {Path(n).name for n in names if n.startswith("deepresearcher/recipes/")}
    assert {"quickstart.yaml", "smollm2-135m-world.yaml", "paper-qwen2.5-7b.yaml", "paper-qwen2.5-7b-verl.yaml",
            "deepspeed-zero3.yaml", "fsdp.yaml"} <= recipes
    benchmarks = {Path(n).name for n in names if n.startswith("deepresearcher/bench/")}
    assert {"search.py", "train.py", "gpu_check.sh"} <= benchmarks
    assert "deepresearcher/inference/qwen_template.jinja" in names


def test_the_installed_copy_finds_its_recipes_and_benchmarks_from_any_folder(
    unpacked_wheel: tuple[Path, list[str]], tmp_path: Path
) -> None:
    site, _ = unpacked_wheel
    script = ("import deepresearcher, deepresearcher.config as c, deepresearcher.cli.bench_cmd as b; "
              "print(deepresearcher.__file__); print(c.load_config('quickstart').train.run_name); print(b.available())")
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120, check=True)
    where, run_name, benchmarks = result.stdout.splitlines()
    assert Path(where).is_relative_to(site), "the unpacked wheel, not the checkout, was imported"
    assert run_name == "quickstart" and "'search'" in benchmarks and "'train'" in benchmarks
