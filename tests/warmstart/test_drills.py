"""Check drills (``train.sft.check_drills``): right answers from the world's facts, laid out as the engine lays out
an episode's last turn, trained on the answer only, packed beside the SFT batch."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import orjson
import pytest

from deepresearcher.config import load_config
from deepresearcher.errors import ConfigError
from deepresearcher.warmstart.drills import check_drills, drill_rows, pack, world_facts


def _facts(world: Path) -> dict[tuple[str, str], str]:
    rows = [orjson.loads(line) for line in (world / "knowledge.jsonl").read_bytes().splitlines()]
    return {(r["subject"], r["relation"]): r["value"] for r in rows if not r["hidden"]}


def test_every_drill_answers_from_the_worlds_facts_both_kinds_both_ways(small_world: Path) -> None:
    facts = _facts(small_world)
    drills = check_drills([small_world], 200, seed=3)
    assert len(drills) == 200 and check_drills([small_world], 200, seed=3) == drills
    kinds = Counter("two_page" if d.question.startswith("Were ") else "comparison" for d in drills)
    assert kinds == {"two_page": 100, "comparison": 100}
    for drill in drills:
        a, b = drill.subjects
        if drill.question.startswith("Were "):
            assert drill.values == (facts[(a, "born_in")], facts[(b, "born_in")])
            assert drill.answer == ("yes" if drill.values[0] == drill.values[1] else "no")
        else:
            first, second = (int(v) for v in drill.values)
            assert first != second and drill.question.endswith(f"{a} or {b}?")
            wants_smaller = any(word in drill.question for word in ("earlier", "smaller"))
            assert drill.answer == (a if (first < second) == wants_smaller else b)
    answers = Counter(d.answer for d in drills if d.answer in ("yes", "no"))
    assert answers["yes"] == answers["no"] == 50
    firsts = sum(d.answer == d.subjects[0] for d in drills if d.answer not in ("yes", "no"))
    assert 30 <= firsts <= 70, "the answer is not always the first name"


def test_world_facts_leave_hidden_facts_out(small_world: Path) -> None:
    rows = [orjson.loads(line) for line in (small_world / "knowledge.jsonl").read_bytes().splitlines()]
    hidden = next(r for r in rows if r["hidden"])
    assert hidden["subject"] not in world_facts(small_world).get(hidden["relation"], {})


@pytest.mark.parametrize("terse", [True, False])
def test_a_drill_row_is_the_engines_last_turn_with_loss_on_the_answer_only(world_config, small_world: Path,
                                                                           qwen_tokenizer, terse: bool) -> None:
    from deepresearcher.agent.session import make_template
    from deepresearcher.train.rollout import replay_turns
    from deepresearcher.warmstart.demonstrations import RecordedToolBox

    config = world_config.model_copy(update={"train": world_config.train.model_copy(update={"compact_prompt": terse})})
    drills = check_drills([small_world], 4, seed=0)
    rows = drill_rows(drills, make_template(qwen_tokenizer, config), terse=terse)
    tasks = [{"id": f"d{i}", "question": d.question, "golds": [d.answer]} for i, d in enumerate(drills)]
    turns = [[f"<think>{d.thought(terse)}</think>\n<answer>{d.answer}</answer>"] for d in drills]
    replayed = asyncio.run(replay_turns(config, tasks, turns, [RecordedToolBox([]) for _ in drills], qwen_tokenizer))
    for drill, (ids, weights), trajectory in zip(drills, rows, replayed, strict=True):
        assert ids == trajectory.all_ids
        trained = [i for i, w in zip(ids, weights, strict=True) if w]
        answer = qwen_tokenizer.decode(trained)  # the answer, with the tag's end where a token merged them
        assert answer.endswith(f"{drill.answer}</answer>") and f"<answer>{drill.answer}</answer>".endswith(answer)
        assert set(weights) == {0.0, 1.0} and weights == sorted(weights), "context first, then the answer"
        assert drill.thought(terse) in qwen_tokenizer.decode(ids[: weights.index(1.0)])


def test_pack_keeps_every_token_in_order_within_the_width() -> None:
    rows = [([1, 2, 3], [0.0, 0.0, 1.0]), ([4, 5], [0.0, 1.0]), ([6, 7, 8, 9], [0.0, 0.0, 0.0, 1.0]), ([10], [1.0])]
    packed = pack(rows, width=5)
    assert packed == [([1, 2, 3, 4, 5], [0.0, 0.0, 1.0, 0.0, 1.0]), ([6, 7, 8, 9, 10], [0.0, 0.0, 0.0, 1.0, 1.0])]
    assert pack(rows, width=3)[2] == ([6, 7, 8], [0.0, 0.0, 0.0]), "a row wider than the width is cut to it"
    assert pack([], width=5) == []


def test_sft_with_drills_learns_their_answers_and_packs_them_beside_the_batch(tiny_model_dir: Path,
                                                                              tmp_path: Path) -> None:
    """The same SFT with drills beside each batch lowers the loss on the drills' answers; without them it does not
    train on them. The batch gains packed rows no wider than its episodes."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from deepresearcher.agent.trajectory import Segment, Trajectory
    from deepresearcher.config import SFTConfig
    from deepresearcher.warmstart.sft import collate, next_token_loss, pad_rows, train_sft

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    episode = Trajectory(segments=[Segment(source="prompt", token_ids=encode("Who founded Acme Works?")),
                                   Segment(source="policy", token_ids=encode("Alice Brown was born in 1901 in Vesk"))])
    rows = [encode(f"{name} was born in Vesk Norland") for name in ("Alice", "Brown")]
    drills = [(ids, [0.0] * (len(ids) - 1) + [1.0]) for ids in rows]  # the loss on the last word only

    ids, mask, weights = collate([episode], 0.0, 2048, 0, iter(drills * 2), drill_count=4, device="cpu")
    packed = pack(drills * 2, len(episode.all_ids))
    assert ids.shape == (1 + len(packed), len(episode.all_ids)) and ids[0].tolist() == episode.all_ids
    assert int(mask[1:].sum()) == sum(len(d[0]) for d in drills * 2) and float(weights[1:].sum()) == 4.0

    def drill_loss(model_dir: Path) -> float:
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        with torch.no_grad():
            return float(next_token_loss(model, *pad_rows(drills, 0, device=model.device)))

    cfg = SFTConfig(steps=30, batch_size=1, learning_rate=3e-3, optimizer="adamw", warmup_steps=0, check_drills=4,
                    two_entity_order="noted")
    with_drills = train_sft(tiny_model_dir, [episode], cfg, tmp_path / "with", drills=drills)
    without = train_sft(tiny_model_dir, [episode], cfg.model_copy(update={"check_drills": 0}), tmp_path / "without")
    assert drill_loss(with_drills.model_dir) < 0.5 * drill_loss(without.model_dir)


def test_drills_need_a_last_thought_that_states_the_values(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="two_entity_order=noted"):
        load_config(None, ["train.sft.check_drills=8"])
    config = load_config(None, [f"cache_dir={tmp_path}", "train.sft.check_drills=8", "train.sft.two_entity_order=noted",
                                "train.data=[nq:train=1]"])
    from deepresearcher.warmstart.pipeline import sft_drills

    with pytest.raises(ConfigError, match="no SFT source is a world"):
        sft_drills(config, tokenizer=None)
