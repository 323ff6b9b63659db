"""constraints.txt, the tested versions scripts/setup.sh installs: consistent with pyproject.toml's ranges,
and (in CI, after a fresh install) exactly what is installed (`scripts/lock.py --check`, run by .ci/run)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _pins() -> dict[str, str]:
    lines = [line for line in (ROOT / "constraints.txt").read_text().splitlines() if line and not line.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[^\s=]+", line) for line in lines), "one name==version a line"
    return {canonicalize_name(n): v for n, _, v in (line.partition("==") for line in lines)}


def _dependencies() -> list[Requirement]:
    """pyproject.toml's dependencies and extras, read as pip reads them (its quoted requirement strings)."""
    text = (ROOT / "pyproject.toml").read_text()
    block = text[text.index("dependencies = [") : text.index("[project.scripts]")]
    return [Requirement(r) for r in re.findall(r'^\s*"([^"]+)",', block, re.M)]


def test_every_locked_version_is_inside_the_ranges_pyproject_allows() -> None:
    pins = _pins()
    outside = [f"{r} (locked {pins[canonicalize_name(r.name)]})" for r in _dependencies()
               if canonicalize_name(r.name) in pins and not r.specifier.contains(pins[canonicalize_name(r.name)], True)]
    assert outside == []


def test_the_fast_moving_libraries_have_tested_upper_bounds() -> None:
    bounded = {canonicalize_name(r.name): r.specifier for r in _dependencies()}
    for name in ("trl", "transformers", "accelerate"):
        assert any(s.operator in ("<", "<=", "==") for s in bounded[name]), f"{name} has no upper bound"
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert f'"verl=={_pins()["verl"]}"' in setup, "verl is installed --no-deps at the locked version"


def test_the_lock_leaves_out_torch_and_the_package_itself() -> None:
    assert not {"torch", "deepresearcher"} & set(_pins())


def test_the_check_reports_a_version_that_differs(tmp_path: Path) -> None:
    """`lock.py --check` against a lock that pins one installed package at another version fails, naming it."""
    script = (ROOT / "scripts" / "lock.py").read_text()
    lock = (ROOT / "constraints.txt").read_text().replace(f"pyyaml=={_pins()['pyyaml']}", "pyyaml==0.0.1")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "lock.py").write_text(script)
    (tmp_path / "constraints.txt").write_text(lock)
    result = subprocess.run([sys.executable, str(tmp_path / "scripts" / "lock.py"), "--check"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 1 and "pyyaml: locked 0.0.1, installed" in result.stdout


def test_setup_installs_the_lock_unless_asked_for_ranges() -> None:
    """setup.sh passes `-c constraints.txt` to every pip install by default; --ranges drops it; a typo stops it."""
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    installs = [line for line in setup.splitlines() if "pip install" in line and "--upgrade pip" not in line]
    assert installs and all('${lock[@]+"${lock[@]}"}' in line for line in installs)
    assert "lock=(-c constraints.txt)" in setup and "--ranges) lock=() ;;" in setup
    typo = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh"), "--rangez"], capture_output=True, text=True,
                          timeout=30)
    assert typo.returncode == 2 and "unknown option --rangez" in typo.stderr
