"""configs/paper-qwen2.5-7b.yaml (the TRL engine) takes two GRPO steps on the CPU with only the model, batch and
lengths made small: the original's dev.parquet questions against the offline eval corpus (real Wikipedia
paragraphs), validated every step as the recipe says.

What a CPU run had to change, and why (everything else is the recipe's):

* model: a tiny random Qwen2 with the real Qwen2.5 tokenizer and chat template (a 7B model is GPU work);
* batch: 2 prompts x 2 rollouts, micro-batch 2, 2 steps (the recipe's 256 x 16 is 4,096 episodes a step);
* lengths: 24 tokens a turn, 4,096 a context (a random model never closes a turn; 2,000 x 10 turns is GPU work);
* generation in process (``train.use_vllm=false``) and fp32 without gradient checkpointing (no GPU here);
* search on the offline corpus (``search.backend=local``) and the extractive reader: no API keys on a CPU runner.

The samples it writes are checked against the original's own code: the system turn is the original's, every
trained token is where the original's ``process_response_mask`` puts one, and every reward is what the
original's ``compute_score`` gives the text its reward manager decoded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from deepresearcher.cli.main import app

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "paper-qwen2.5-7b.yaml"
PROMPTS, GROUP, STEPS = 2, 2, 2
SMALL = [f"train.prompts_per_step={PROMPTS}", f"train.group_size={GROUP}", "train.micro_batch_size=2",
         f"train.max_steps={STEPS}", f"train.sample_trajectories={PROMPTS * GROUP}", "train.save_every=1",
         "agent.max_tokens_per_turn=24", "agent.context_budget=4096", "train.use_vllm=false", "train.bf16=false",
         "train.gradient_checkpointing=false"]


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random ~2.5M-parameter Qwen2 with the offline Qwen2.5 tokenizer (its chat template renders tools)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from deepresearcher.inference.embedded import load_qwen25_tokenizer

    out = tmp_path_factory.mktemp("tiny-qwen")
    tokenizer = load_qwen25_tokenizer(tmp_path_factory.mktemp("tok"))
    tokenizer.save_pretrained(out)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192,
                         tie_word_embeddings=True, eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
                         pad_token_id=tokenizer.pad_token_id)
    Qwen2ForCausalLM(config).save_pretrained(out)
    return out


@pytest.mark.timeout(900)
def test_the_paper_recipe_takes_two_grpo_steps_on_dev_parquet_against_the_offline_corpus(
        shared_data_dir: Path, tiny_qwen: Path, tmp_path: Path, reference_functions, reference_method) -> None:
    from deepresearcher.agent.protocols.deepresearcher import system_prompt
    from deepresearcher.config import load_config
    from deepresearcher.eval.corpus import build_eval_corpus
    from deepresearcher.train.run_dir import read_metrics

    index = build_eval_corpus(tmp_path / "eval-corpus", shared_data_dir).index_dir
    overrides = [*SMALL, "search.backend=local", f"search.index={index}", "browse.reader=extractive",
                 f"cache_dir={tmp_path / 'cache'}", f"train.runs_dir={tmp_path / 'runs'}",
                 "train.eval_data=[{kind: benchmark, name: deepresearcher, split: test, limit: 2}]",
                 "train.eval_tasks=2"]
    args = ["train", "--config", str(RECIPE), "--model", str(tiny_qwen),
            "--data", str(shared_data_dir / "deepresearcher" / "dev.parquet")]
    for override in overrides:
        args += ["--set", override]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"

    config = load_config(RECIPE, overrides)
    assert (config.agent.protocol, config.reward.metric) == ("deepresearcher", "deepresearcher")
    assert config.train.eval_every == 1 and config.agent.max_turns == 10  # the recipe's, untouched
    run = tmp_path / "runs" / config.train.run_name
    metrics = read_metrics(run / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2]
    assert all("heldout_f1" in m for m in metrics), "validated every step (the original's test_freq=1)"

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_qwen))
    original = reference_functions("verl/utils/reward_score/format_and_f1.py")
    mask_of = reference_method("verl/workers/actor/dp_actor.py", "DataParallelPPOActor", "process_response_mask")
    for step in (1, 2):
        samples = [json.loads(line) for line in (run / "samples" / f"step_{step:05d}.jsonl").read_text().splitlines()]
        assert len(samples) == PROMPTS * GROUP
        for sample in samples:
            prompt = [t for s in sample["segments"] if s["source"] == "prompt" for t in s["token_ids"]]
            completion = [t for s in sample["segments"] if s["source"] != "prompt" for t in s["token_ids"]]
            trained = [int(s["source"] == "policy") for s in sample["segments"] if s["source"] != "prompt"
                       for _ in s["token_ids"]]
            text = tokenizer.decode(prompt)
            assert text.startswith("<|im_start|>system\n" + system_prompt().split("* Today is")[0])
            assert text.endswith("<|im_start|>assistant\n"), "the first prompt without <think>, as the original's"
            assert sample["question"] in text
            assert tokenizer.decode(completion) == sample["response_text"]
            expected = mask_of(None, torch.tensor([completion]), torch.ones(1, len(completion), dtype=torch.long),
                               tokenizer)[0].tolist()
            assert trained == expected
            ground_truth = "<|answer_split|>".join(sample["golds"])
            assert sample["metadata"]["reward"] == original.compute_score(sample["response_text"], ground_truth)
