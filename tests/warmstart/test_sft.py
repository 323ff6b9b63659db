"""SFT warm start: the weighted loss by hand, and a short run on real oracle trajectories that lowers it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from deepresearcher.agent.trajectory import Segment, Trajectory
from deepresearcher.config import SFTConfig, load_config
from deepresearcher.train.precision import BF16_WIDTH_MULTIPLE
from deepresearcher.warmstart.sft import (
    collate,
    next_token_loss,
    sft_loss,
    token_weights,
    train_sft,
)

torch.set_num_threads(1)


def _trajectory() -> Trajectory:
    return Trajectory(segments=[
        Segment(source="prompt", token_ids=[5, 6]),
        Segment(source="policy", token_ids=[7], logprobs=[0.0]),
        Segment(source="env", token_ids=[8, 9]),
        Segment(source="policy", token_ids=[10], logprobs=[0.0]),
    ])


def test_weights_zero_on_prompt_one_on_policy_obs_weight_on_observations() -> None:
    assert token_weights(_trajectory(), 0.25) == [0.0, 0.0, 1.0, 0.25, 0.25, 1.0]


def test_weighted_loss_by_hand() -> None:
    """Uniform logits give CE = ln V per token, so the weighted mean is ln V whatever the weights;
    making one observation token certain lowers the loss by exactly its weighted share."""
    ids, _, weights = collate([_trajectory()], 0.5, 100, pad_id=0, device="cpu")
    targets, target_weights = ids[0, 1:], weights[0, 1:]
    vocab = 16
    logits = torch.zeros(len(targets), vocab)
    assert float(sft_loss(logits, targets, target_weights)) == pytest.approx(math.log(vocab))
    logits[2, 8] = 1e4  # position 2 predicts token 3 (id 8, an observation token, weight 0.5)
    total = 1 + 0.5 + 0.5 + 1
    assert float(sft_loss(logits, targets, target_weights)) == pytest.approx(
        math.log(vocab) * (total - 0.5) / total, rel=1e-4)


def test_next_token_loss_equals_the_full_logits_loss(tiny_model_dir: Path) -> None:
    """Projecting only the weighted positions gives the loss, and the gradients, of the full-logits path."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    short = Trajectory(segments=[Segment(source="prompt", token_ids=[5, 6, 7]),
                                 Segment(source="policy", token_ids=[11, 12], logprobs=[0.0, 0.0])])
    ids, mask, weights = collate([_trajectory(), short], 0.3, 100, pad_id=0, device=model.device)

    def full_logits_loss() -> torch.Tensor:
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
        ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        return (ce * weights[:, 1:]).sum() / weights[:, 1:].sum()

    expected = full_logits_loss()
    expected.backward()
    expected_grad = model.get_output_embeddings().weight.grad.clone()
    model.zero_grad()
    loss = next_token_loss(model, ids, mask, weights)
    loss.backward()
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)
    assert torch.allclose(model.get_output_embeddings().weight.grad, expected_grad, atol=1e-6)


@pytest.mark.timeout(120)
def test_sft_on_oracle_trajectories_lowers_loss(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Oracle episodes from the real tools, replayed through the engine, train the tiny model: loss falls."""
    from transformers import AutoTokenizer

    from deepresearcher.train.rollout import Rollouts, task_dict
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    config = load_config(None, [f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", "search.top_k=2",
                                "search.snippet_chars=60", "browse.top_passages=1", "train.compact_prompt=true"])
    tasks = [task_dict(t) for t in load_tasks(ensure_world(config), "train")][:8]
    rollouts = Rollouts(config)
    try:
        data = rollouts.replay(tasks, rollouts.oracle_episodes(tasks), AutoTokenizer.from_pretrained(tiny_model_dir))
    finally:
        rollouts.close()
    assert all(t.termination == "answer" for t in data)
    assert all({s.source for s in t.segments} == {"prompt", "policy", "env"} for t in data)
    losses: list[float] = []
    cfg = SFTConfig(num_tasks=8, steps=12, batch_size=4, learning_rate=1e-2, warmup_steps=0, max_seq_len=512)
    result = train_sft(tiny_model_dir, data, cfg, tmp_path / "sft", on_step=lambda step, loss: losses.append(loss))
    assert len(losses) == 12
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.5
    assert (result.model_dir / "config.json").is_file()


def test_length_bucketed_batches_cover_every_item_and_pad_little() -> None:
    """One pass yields every index once (full batches only), and batches group similar lengths."""
    from deepresearcher.warmstart.sft import length_bucketed_batches

    lengths = [10 * (i % 7) + 5 for i in range(64)]
    batches = length_bucketed_batches(lengths, batch_size=4, seed=1, pool=16)
    first_pass = [next(batches) for _ in range(16)]
    assert sorted(i for b in first_pass for i in b) == list(range(64))
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in first_pass) / 16
    assert spread < 20  # random batches of 4 over 7 length levels spread ~45 on average


@pytest.mark.parametrize("bf16", [False, True])
def test_bf16_sft_runs_forward_in_bfloat16_and_keeps_fp32_weights(bf16: bool, tiny_model_dir: Path,
                                                                 tmp_path: Path) -> None:
    """``bf16=True`` autocasts the forward pass (the linear layers compute in bfloat16), while the saved
    weights stay fp32 and the loss still falls; ``bf16=False`` computes in fp32 throughout."""
    from transformers import AutoModelForCausalLM

    data = [Trajectory(segments=[Segment(source="prompt", token_ids=[5, 6, 7]),
                                 Segment(source="policy", token_ids=[8 + i % 3, 9, 10, 11], logprobs=[0.0] * 4)])
            for i in range(8)]
    dtypes: set[torch.dtype] = set()
    shapes: list[tuple[int, ...]] = []  # every Linear's input shape: oneDNN builds a bf16 kernel per shape

    def record(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], output: object) -> None:
        if isinstance(module, torch.nn.Linear) and isinstance(output, torch.Tensor):
            dtypes.add(output.dtype)
            shapes.append(tuple(inputs[0].shape))

    losses: list[float] = []
    cfg = SFTConfig(num_tasks=8, steps=10, batch_size=4, learning_rate=1e-2, warmup_steps=0, max_seq_len=64)
    handle = torch.nn.modules.module.register_module_forward_hook(record)
    try:
        result = train_sft(tiny_model_dir, data, cfg, tmp_path / "sft", bf16=bf16,
                           on_step=lambda step, loss: losses.append(loss))
    finally:
        handle.remove()
    assert dtypes == ({torch.bfloat16} if bf16 else {torch.float32})
    # under bf16 the widths (3-dim inputs) and the output layer's rows (2-dim) are multiples of 64
    assert all(shape[-2] % BF16_WIDTH_MULTIPLE == 0 for shape in shapes) is bf16
    assert losses[-1] < losses[0] - 0.5
    saved = AutoModelForCausalLM.from_pretrained(result.model_dir)
    assert {p.dtype for p in saved.parameters()} == {torch.float32}


def test_only_masks_of_right_padded_rows_are_left_out() -> None:
    """Right padding is hidden by causal attention alone; padding before a real token (a left-padded prompt,
    a hole) needs the mask."""
    from deepresearcher.train.output_layer import right_padded

    assert right_padded(torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]]))
    assert not right_padded(torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]))
    assert not right_padded(torch.tensor([[1, 0, 1, 1]]))


def test_muon_takes_the_hidden_matrices_and_adamw_the_rest(tiny_model_dir: Path) -> None:
    """Each parameter is in exactly one optimizer: Muon holds only 2-D hidden-layer weights (never the
    embeddings or the output layer), AdamW everything else; a step through both moves both groups."""
    from transformers import AutoModelForCausalLM

    from deepresearcher.warmstart.muon import Muon
    from deepresearcher.warmstart.sft import sft_optimizers

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    muon, adamw = sft_optimizers(model, SFTConfig(optimizer="muon", learning_rate=1e-2, muon_learning_rate=0.02))
    assert isinstance(muon, Muon) and isinstance(adamw, torch.optim.AdamW)
    in_muon = {id(p) for p in muon.param_groups[0]["params"]}
    in_adamw = {id(p) for p in adamw.param_groups[0]["params"]}
    assert in_muon.isdisjoint(in_adamw) and in_muon | in_adamw == {id(p) for p in model.parameters()}
    assert all(p.ndim == 2 for p in muon.param_groups[0]["params"])
    assert id(model.get_input_embeddings().weight) in in_adamw
    assert id(model.get_output_embeddings().weight) in in_adamw

    ids, mask, weights = collate([_trajectory()] * 2, 0.3, 100, pad_id=0, device=model.device)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizers = sft_optimizers(model, SFTConfig(optimizer="muon", learning_rate=1e-2, muon_learning_rate=0.02))
    losses = []
    for _ in range(5):
        loss = next_token_loss(model, ids, mask, weights)
        model.zero_grad()
        loss.backward()
        for optimizer in optimizers:
            optimizer.step()
        losses.append(float(loss.detach()))
    moved = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    assert "model.layers.0.mlp.down_proj.weight" in moved and "model.embed_tokens.weight" in moved
    assert losses[-1] < losses[0]
