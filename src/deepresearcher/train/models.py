"""Turn a ``--model`` value into a Hugging Face checkpoint directory every trainer can load."""

from __future__ import annotations

from pathlib import Path

from deepresearcher.errors import ConfigError

EMBEDDED = ("smollm2-135m", "smollm2")


def resolve_policy(model: str, cache_dir: Path) -> Path:
    """A checkpoint directory for ``model``: a local path as is, or the embedded SmolLM2-135M-Instruct.

    The embedded model ships as GGUF; the first use saves it once as an ordinary float32 checkpoint
    (model plus tokenizer) under ``cache_dir/models/smollm2-135m-hf`` so TRL can load it by path.
    """
    if model in EMBEDDED:
        target = cache_dir / "models" / "smollm2-135m-hf"
        if not (target / "config.json").is_file():
            from deepresearcher.generate.embedded import load_smollm2_model, load_smollm2_tokenizer

            load_smollm2_model(cache_dir=cache_dir)  # first call dequantizes and caches the weights
            policy = load_smollm2_model(cache_dir=cache_dir)  # loaded from that cache, so it can be saved
            tokenizer = load_smollm2_tokenizer(cache_dir=cache_dir)
            tmp = target.with_name(target.name + ".tmp")
            policy.save_pretrained(str(tmp))
            tokenizer.save_pretrained(str(tmp))
            tmp.replace(target)
        return target
    path = Path(model)
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"--model {model!r} is neither a checkpoint directory (with config.json) nor an embedded model "
            f"({', '.join(EMBEDDED)}); pass a Hugging Face checkpoint directory on disk."
        )
    return path
