"""One device choice (``runtime.device``), honoured by every path that loads a model.

Three guards: the source loads models only through ``inference.loader`` (an AST scan); the choice is checked
and obeyed (``cuda`` without a GPU fails with the fix, ``cpu`` keeps models on the CPU even where a GPU is
seen); and the code beside a model builds its tensors on the model's device, never a fixed one. The last runs
on the CPU: with torch's default device set to ``meta``, a tensor built without an explicit device lands on
meta and the CPU model refuses it, as a GPU model refuses a CPU tensor.
"""

from __future__ import annotations

import ast
import asyncio
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import deepresearcher
from deepresearcher.config import load_config
from deepresearcher.errors import ConfigError, MissingDependencyError
from deepresearcher.inference import device, loader

torch = pytest.importorskip("torch")

PACKAGE = Path(deepresearcher.__file__).parent

LOADER = "inference/loader.py"
EXCEPTIONS = {
    "inference/embedded.py": "the embedded GGUF's conversion to a float32 checkpoint, a file conversion on the CPU",
    "quickstart/tiny_model.py": "creating a random model from a config and saving it (creation, not loading)",
}
MODEL_CLASS = re.compile(r"^(AutoModel\w*|\w+ForCausalLM)$")


def _receiver(node: ast.expr) -> str:
    """The last name of ``X`` or ``a.b.X`` (``""`` for anything else)."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _names_cuda(node: ast.expr) -> bool:
    """Whether ``node`` is a literal naming a CUDA device (``"cuda"``, ``"cuda:1"``): a fixed GPU."""
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda")


def _on_meta(tree: ast.AST) -> set[int]:
    """The nodes inside ``with torch.device("meta"):`` blocks: a model built there holds no weights (a shape
    to count parameters of), so it is not a load."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
            isinstance(item.context_expr, ast.Call) and _receiver(item.context_expr.func) == "device"
            and [getattr(a, "value", None) for a in item.context_expr.args] == ["meta"]
            for item in node.items
        ):
            inside.update(id(child) for statement in node.body for child in ast.walk(statement))
    return inside


def model_loads(source: str) -> list[str]:
    """Where ``source`` loads a model or moves one to a fixed GPU: ``<ModelClass>.from_pretrained/from_config``
    (tokenizers are fine; a model built on ``meta`` is no load), ``.to("cuda...")`` (``device=`` too) and
    ``.cuda()``; as ``line: code`` strings."""
    tree = ast.parse(source)
    on_meta = _on_meta(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)) or id(node) in on_meta:
            continue
        method = node.func.attr
        loads = method in ("from_pretrained", "from_config") and MODEL_CLASS.match(_receiver(node.func.value))
        to_cuda = method == "to" and any(_names_cuda(a) for a in [*node.args, *(k.value for k in node.keywords)])
        if loads or to_cuda or method == "cuda":
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_finds_model_loads_and_fixed_gpus() -> None:
    """The scan below is not vacuous: it finds each kind of load and move, and passes tokenizers and configs."""
    source = """
model = AutoModelForCausalLM.from_pretrained(path)
encoder = transformers.AutoModel.from_pretrained(path)
fresh = Qwen2ForCausalLM.from_config(config)
model.to("cuda")
model.to(device="cuda:0")
model.cuda()
tokenizer = AutoTokenizer.from_pretrained(path)
env = WebEnvironment.from_config(config)
model.to(device.current())
with torch.device("meta"):
    shape_only = AutoModelForCausalLM.from_config(config)
with torch.device("cpu"):
    loaded = AutoModelForCausalLM.from_pretrained(path)
"""
    assert [line.split(":")[0] for line in model_loads(source)] == ["2", "3", "4", "5", "6", "7", "14"]


def test_models_are_loaded_only_by_the_loader() -> None:
    """Every model of the package is loaded by ``inference/loader.py`` onto the one device choice; a model
    loaded (or sent to a GPU) anywhere else would ignore ``runtime.device``."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == LOADER or relative in EXCEPTIONS:
            continue
        offenders += [f"{relative}:{hit}" for hit in model_loads(path.read_text(encoding="utf-8"))]
    assert not offenders, (
        "load models with deepresearcher.inference.loader (load_checkpoint for inference, load_trainable to train, "
        f"load_encoder for an encoder), which puts them on the process's device choice: {offenders}"
    )


def test_the_exceptions_still_exist() -> None:
    """An exception named here that no longer exists is removed from the list rather than left open."""
    assert all((PACKAGE / relative).is_file() for relative in [LOADER, *EXCEPTIONS])


@pytest.fixture
def choice_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's device choice as it was before the test, whatever the test configures."""
    monkeypatch.setattr(device, "_choice", device.choice())


@pytest.mark.usefixtures("choice_restored")
def test_cuda_without_a_gpu_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """``runtime.device=cuda`` on a machine whose torch sees no GPU fails when the command reads its config."""
    from deepresearcher.cli.common import resolve_config

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"runtime\.device=cuda.*no CUDA GPU.*runtime\.device=auto or cpu"):
        resolve_config(None, ["runtime.device=cuda"])
    assert resolve_config(None, ["runtime.device=cpu"]).runtime.device == "cpu"
    assert device.current() == torch.device("cpu")


def test_a_bad_choice_is_refused_by_the_config() -> None:
    with pytest.raises(ConfigError, match="runtime.device"):
        load_config(None, ["runtime.device=tpu"])


@pytest.mark.usefixtures("choice_restored")
def test_cpu_keeps_every_loader_on_the_cpu_where_a_gpu_is_seen(tiny_model_dir: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """With a GPU in sight (``auto`` would take it), ``runtime.device=cpu`` keeps each loader's model on the CPU
    in float32: the loaders follow the choice, not what torch can see."""
    from deepresearcher.web.reader.embedding import find_minilm_dir

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert device.resolve("auto") == torch.device("cuda", 0)
    device.configure("cpu")
    models = [loader.load_checkpoint(tiny_model_dir, shared=False)[0], loader.load_trainable(tiny_model_dir)]
    try:
        models.append(loader.load_encoder(find_minilm_dir())[0])
    except MissingDependencyError:
        pass  # the MiniLM package is an optional install; the causal models still prove the point
    for model in models:
        assert {(p.device.type, p.dtype) for p in model.parameters()} == {("cpu", torch.float32)}
    assert not models[0].training and models[1].training


def test_each_launched_process_takes_the_gpu_of_its_local_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``accelerate launch`` a model loads before the trainer calls set_device: it must still go to the
    process's own GPU, not GPU 0 of every process."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert device.resolve("cuda") == torch.device("cuda", 0)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert device.resolve("auto") == device.resolve("cuda") == torch.device("cuda", 3)
    assert device.resolve("cpu") == torch.device("cpu")


@contextmanager
def default_device_meta(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tensors built without an explicit device land on ``meta`` (on this thread: torch's default device is
    per thread), where a CPU model refuses them. Loading a model from disk is not under test and transformers
    refuses it under meta, so the loaders run with the default device lifted."""

    def lifted(load: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            torch.set_default_device(None)
            try:
                return load(*args, **kwargs)
            finally:
                torch.set_default_device("meta")

        return run

    for name in ("load_checkpoint", "load_trainable"):
        monkeypatch.setattr(loader, name, lifted(getattr(loader, name)))
    torch.set_default_device("meta")
    try:
        yield
    finally:
        torch.set_default_device(None)


@pytest.mark.usefixtures("choice_restored")
def test_engine_generate_builds_on_the_models_device(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The local engine's decode (driven on this thread) builds its batches beside the model."""
    from deepresearcher.generate.base import SamplingParams
    from deepresearcher.inference.engine import LocalEngine

    device.configure("cpu")
    model, tokenizer = loader.load_checkpoint(tiny_model_dir, shared=False)
    engine = LocalEngine(model, tokenizer, seed=0)
    prompt = tokenizer("Vesk is the capital of", add_special_tokens=False)["input_ids"]
    loop = asyncio.new_event_loop()
    try:
        with default_device_meta(monkeypatch):
            result = engine.run_driving(loop, engine.generate(prompt, SamplingParams(max_tokens=6, temperature=0.7)))
    finally:
        loop.close()
    assert result.token_ids and len(result.logprobs) == len(result.token_ids)


@pytest.mark.usefixtures("choice_restored")
def test_sft_step_builds_on_the_models_device(tiny_model_dir: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """SFT puts each batch (episodes and drill rows) on the device the model trains on."""
    from deepresearcher.agent.trajectory import Segment, Trajectory
    from deepresearcher.config import SFTConfig
    from deepresearcher.warmstart.sft import train_sft

    device.configure("cpu")
    data = [Trajectory(segments=[Segment(source="prompt", token_ids=[5, 6, 7]),
                                 Segment(source="policy", token_ids=[8, 9, 10], logprobs=[0.0] * 3),
                                 Segment(source="env", token_ids=[11, 12])]) for _ in range(2)]
    drills = [([5, 6, 7, 8], [0.0, 0.0, 0.0, 1.0])]
    cfg = SFTConfig(steps=2, batch_size=2, warmup_steps=0, check_drills=1, two_entity_order="noted")
    with default_device_meta(monkeypatch):
        result = train_sft(tiny_model_dir, data, cfg, tmp_path / "sft", drills=drills)
    assert result.steps == 2 and math.isfinite(result.final_loss)


@pytest.mark.timeout(180)
@pytest.mark.usefixtures("choice_restored")
def test_heldout_evaluation_builds_on_the_models_device(tiny_model_dir: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Held-out (and final) evaluation loads the saved model through the loader and runs episodes beside it."""
    from deepresearcher.train.heldout import evaluate
    from deepresearcher.train.rollout import Rollouts, task_dict
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    device.configure("cpu")
    config = load_config(None, [f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", "search.top_k=2",
                                "search.snippet_chars=60", "browse.top_passages=1", "agent.max_turns=2",
                                "agent.max_tokens_per_turn=8", "agent.context_budget=1024", "train.compact_prompt=true"])
    tasks = [task_dict(t) for t in load_tasks(ensure_world(config), "test")][:2]
    rollouts = Rollouts(config, seed=0)
    try:
        with default_device_meta(monkeypatch):
            result = evaluate(tiny_model_dir, tasks, rollouts, config)
    finally:
        rollouts.close()
    assert [row["id"] for row in result.rows] == [t["id"] for t in tasks]
