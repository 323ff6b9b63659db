"""``bench gpu``'s first process: the checkpoint every part loads, and the machine it runs on.

The model is built here once (a random model of a Qwen2.5 shape, or ``--tiny``'s) and saved with the embedded
Qwen2.5 tokenizer, so the parts time training and generation rather than initialisation; ``--model`` names a
checkpoint instead. Its parameters are counted on the meta device, which allocates nothing.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from deepresearcher.bench._gpu_common import SHAPES, TINY_SHAPE, peak_flops

_PACKAGES = ("torch", "transformers", "trl", "accelerate", "vllm", "verl", "ray", "flash-attn", "kernels")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _driver() -> str | None:
    """The NVIDIA driver's version from nvidia-smi (torch does not report it), or None without one."""
    if shutil.which("nvidia-smi") is None:
        return None
    done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True, timeout=30, check=False)
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None


def machine() -> dict[str, Any]:
    """The device, its peak bf16 FLOP/s, and the versions a bug report about speed needs."""
    import torch

    from deepresearcher.inference import device

    where = device.current()
    on_gpu = where.type == "cuda"
    name = torch.cuda.get_device_name(where) if on_gpu else f"CPU ({platform.processor() or platform.machine()})"
    return {
        "device": name,
        "device_type": where.type,
        "gpu_memory_gb": round(torch.cuda.get_device_properties(where).total_memory / 2**30, 1) if on_gpu else None,
        "peak_bf16_flops": peak_flops(name) if on_gpu else None,
        "cuda": torch.version.cuda,
        "driver": _driver(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "versions": {package: _version(package) for package in _PACKAGES},
    }


def _count_params(model_dir: Path) -> int:
    """Parameters of the checkpoint's architecture (tied embeddings once), without allocating them."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(model_dir)))
    return sum(p.numel() for p in model.parameters())


def _build(shape: dict[str, Any], out: Path, cache_dir: Path) -> None:
    """A random model of ``shape`` in bfloat16 (as the released checkpoints are) with the Qwen2.5 tokenizer,
    initialised on the GPU where there is one (minutes faster for 7B)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from deepresearcher.inference import device
    from deepresearcher.inference.embedded import load_qwen25_tokenizer

    tokenizer = load_qwen25_tokenizer(cache_dir)
    tokenizer.save_pretrained(out)
    config = Qwen2Config(**shape, pad_token_id=tokenizer.pad_token_id, architectures=["Qwen2ForCausalLM"])
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with device.current():
            model = Qwen2ForCausalLM(config)
        model.save_pretrained(out)
    finally:
        torch.set_default_dtype(default)


def prepare(options: dict[str, Any], work: Path) -> dict[str, Any]:
    """The checkpoint (built, or ``--model``'s) and the machine, as the parts read them from ``results/setup.json``."""
    if options["model"]:  # checked by the parent: a directory with config.json
        model_dir = Path(options["model"]).expanduser().resolve()
        label = str(model_dir)
    else:
        label = "tiny" if options["tiny"] else options["shape"]
        model_dir = work / "model"
        _build(TINY_SHAPE if options["tiny"] else SHAPES[options["shape"]], model_dir, work / "cache")
    return {"status": "ok", "model": {"name": label, "path": str(model_dir), "params": _count_params(model_dir)},
            "machine": machine()}
