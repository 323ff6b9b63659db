"""A tokenizer and a tiny Qwen2 model made from scratch for the synthetic world.

The quickstart trains on a laptop in minutes, so it cannot start from a real LLM. Instead it trains a
byte-level BPE tokenizer on the world's own text (pages and questions), adds the tokens of the chat
template as single tokens, and builds a ~1M-parameter Qwen2 model with random weights. Both are saved
as an ordinary Hugging Face checkpoint directory, so every other code path (generator, SFT, GRPO,
eval) loads them with ``AutoTokenizer`` / ``AutoModelForCausalLM`` like any real model.

Example::

    build_tiny_checkpoint(texts, out_dir / "model", TinyModelConfig(hidden_size=128))
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from deepresearcher.config import TinyModelConfig

logger = logging.getLogger(__name__)

# ChatML control tokens: special (dropped by ``skip_special_tokens``), as in Qwen2.5.
PAD_TOKEN = "<|endoftext|>"
CHAT_SPECIAL_TOKENS: tuple[str, ...] = (PAD_TOKEN, "<|im_start|>", "<|im_end|>")
# The agent's protocol tags: one token each, but *not* special, so decoded text keeps them.
PROTOCOL_TOKENS: tuple[str, ...] = (
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<answer>",
    "</answer>",
)

# ChatML, as Qwen2.5 renders it: a tool observation is a user turn wrapped in <tool_response> tags.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'tool' %}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def train_tokenizer(texts: Iterable[str], out_dir: Path, vocab_size: int = 2048, split_digits: bool = False) -> Path:
    """Train a byte-level BPE tokenizer on ``texts`` and save it, with the ChatML template, to ``out_dir``.

    Byte-level means any string (a URL, a name never seen in training) still encodes; the protocol
    tags are added tokens so the model emits each one in a single step. ``split_digits`` keeps every digit
    a token of its own (Qwen2.5 does the same), so two numbers always line up digit for digit; off in the
    quickstart, where it did not teach the tiny model to compare them (docs/train.md, Two-entity tasks).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.pre_tokenizer = (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level]) if split_digits else byte_level
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(CHAT_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_nonempty(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token=PAD_TOKEN,
        bos_token=None,
        additional_special_tokens=["<|im_start|>"],
    )
    fast.add_tokens(list(PROTOCOL_TOKENS), special_tokens=False)
    fast.chat_template = CHATML_TEMPLATE
    fast.model_max_length = 1_000_000
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out_dir)
    logger.info("trained a %d-token byte-level BPE tokenizer into %s", len(fast), out_dir)
    return out_dir


def _nonempty(texts: Iterable[str]) -> Iterator[str]:
    for text in texts:
        if text:
            yield text


def tiny_qwen2_config(spec: TinyModelConfig, vocab_size: int, pad_token_id: int, eos_token_id: int) -> Any:
    """The Qwen2 config of the tiny model ``spec`` describes (tied embeddings, no BOS)."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=True,
        pad_token_id=pad_token_id,
        eos_token_id=eos_token_id,
        bos_token_id=None,
    )


def make_tiny_model(out_dir: Path, spec: TinyModelConfig | None = None, seed: int = 0) -> int:
    """Create a randomly initialized Qwen2 model sized for the tokenizer in ``out_dir``; returns its parameter count.

    The tokenizer must already be saved there (``train_tokenizer``): the vocabulary size, pad and
    eos ids of the model are read from it, so model and tokenizer can never disagree.
    """
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(out_dir)
    config = tiny_qwen2_config(spec or TinyModelConfig(), len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    model.save_pretrained(out_dir)
    n_params = sum(p.numel() for p in model.parameters())
    logger.info("made a %.2fM-parameter Qwen2 model in %s", n_params / 1e6, out_dir)
    return n_params


def build_tiny_checkpoint(
    texts: Iterable[str], out_dir: Path, spec: TinyModelConfig | None = None, seed: int = 0
) -> Path:
    """Tokenizer plus model in one directory, ready for ``from_pretrained``."""
    spec = spec or TinyModelConfig()
    train_tokenizer(texts, out_dir, vocab_size=spec.vocab_size, split_digits=spec.split_digits)
    make_tiny_model(out_dir, spec, seed=seed)
    return out_dir
