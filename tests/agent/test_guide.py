"""Guided decoding (``agent.guide``): which sessions are guided, what each constraint lets a model write, and that
a guided episode searches before it answers and answers with text it read, even with a random model."""

from __future__ import annotations

import re

import pytest

from deepresearcher.agent.guide import guide_requested, local_policy
from deepresearcher.agent.guide.constraints import Choice, CopySpan, FreeText, Vocabulary
from deepresearcher.agent.guide.reading import answer_kind, answer_phrases, candidates, page_phrases, yes_no
from deepresearcher.agent.guide.turn import next_action, unread_results
from deepresearcher.agent.trajectory import ToolCallRecord, Trajectory, TurnRecord
from deepresearcher.config import load_config
from deepresearcher.errors import ConfigError

RECIPES = ["configs/paper-qwen2.5-7b.yaml", "configs/paper-qwen2.5-7b-verl.yaml", "configs/quickstart.yaml",
           "configs/smollm2-135m-world.yaml"]


@pytest.fixture(scope="module")
def vocab(smollm2_tokenizer) -> Vocabulary:
    return Vocabulary(smollm2_tokenizer)


def _walk(constraint, vocab: Vocabulary, pick=lambda ids: ids[0], stop: str = "\n", steps: int = 60) -> str:
    """The text a model writes when it always takes ``pick`` of the allowed ids, until ``stop``."""
    sampled: list[int] = []
    for _ in range(steps):
        allowed = [int(i) for i in constraint.allowed(sampled)]
        assert allowed, "a constraint never leaves a model without a token"
        sampled.append(pick(allowed))
        if vocab.text(sampled).endswith(stop):
            break
    return vocab.text(sampled)


def test_the_embedded_base_model_is_guided_in_research_and_eval_only():
    """auto: the embedded SmolLM2 built from a fresh config is guided in eval decoding (research, eval); never a
    policy handed in (a trainer's, the quickstart's), never training rollouts, never a model directory."""
    fresh = load_config(None, [])
    assert fresh.agent.guide == "auto" and fresh.agent.policy == "smollm2"
    assert guide_requested(fresh, decoding="eval", policy_from_config=True)
    assert guide_requested(load_config(None, ["agent.policy=local:smollm2"]), decoding="eval", policy_from_config=True)
    assert not guide_requested(fresh, decoding="train", policy_from_config=True)
    assert not guide_requested(fresh, decoding="eval", policy_from_config=False)
    assert not guide_requested(fresh.model_copy(update={"agent": fresh.agent.model_copy(update={"guide": "off"})}),
                               decoding="eval", policy_from_config=True)
    for trained in ("runs/quickstart/model", "vllm:http://127.0.0.1:8000/v1"):
        assert not guide_requested(load_config(None, [f"agent.policy={trained}"]), decoding="eval",
                                   policy_from_config=True)


@pytest.mark.parametrize("recipe", RECIPES)
def test_trained_agents_and_the_paper_recipes_run_unguided(recipe):
    """The paper recipes (the original protocol) and the quickstart (a compact prompt, its own model) are never
    guided; the SmolLM2 recipe trains unguided (its rollouts) and evaluates its trained model (handed in) unguided."""
    config = load_config(recipe, [])
    assert not guide_requested(config, decoding="train", policy_from_config=True)
    assert not guide_requested(config, decoding="eval", policy_from_config=False)
    if config.agent.protocol != "native" or config.train.compact_prompt:
        assert not guide_requested(config, decoding="eval", policy_from_config=True)


def test_guide_on_refuses_another_protocol_and_keeps_a_local_policy_local():
    with pytest.raises(ConfigError, match="native"):
        guide_requested(load_config(None, ["agent.guide=on", "agent.protocol=deepresearcher"]), decoding="eval",
                        policy_from_config=True)
    assert local_policy(load_config(None, [])).agent.policy == "local:smollm2"
    assert local_policy(load_config(None, ["agent.policy=local:smollm2"])).agent.policy == "local:smollm2"
    assert local_policy(load_config(None, ["agent.policy=vllm:http://h:1/v1"])).agent.policy == "vllm:http://h:1/v1"


def test_free_text_never_leaves_its_place(vocab):
    """A query may not close its JSON string early, open a tag or break the line; it ends only with its stop."""
    free = FreeText(vocab, banned='<>{}[]\\\n', end='"')
    first, rest = set(free.allowed([]).tolist()), set(free.allowed(vocab.ids("web")).tolist())
    assert not set(vocab.ids('"')) & first, "an empty query cannot end"
    assert set(vocab.ids('"')) <= rest
    for i in rest - set(vocab.ids('"')):
        assert not set(vocab.texts[i]) & set('"<>{}[]\\\n'), vocab.texts[i]


def test_a_choice_ends_on_one_of_its_options_whatever_the_model_picks(vocab, smollm2_tokenizer):
    encode = lambda text: smollm2_tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    options = [" Pedres Broutrein\n", " Notable people from Kliashiaport\n", " Pedres\n"]
    choice = Choice(vocab, encode, options)
    assert {_walk(choice, vocab, pick) for pick in (min, max, lambda ids: ids[len(ids) // 2])} <= set(options)
    assert _walk(choice, vocab, max) in options and _walk(choice, vocab, min) in options


def test_a_copied_span_starts_at_a_word_stays_in_one_line_and_ends_at_a_word(vocab):
    """Whatever tokens the model prefers, what it copies is a span of the text it read, whole words."""
    notes = "| Place of birth | Kliashiaport |\nThey were born in Kliashiaport in 1953."
    span = CopySpan(vocab, [notes])
    for pick in (min, max, lambda ids: ids[len(ids) // 3]):
        text = _walk(span, vocab, pick).rstrip("\n")
        assert text.strip() and any(text in line for line in notes.splitlines()), text
        line = next(line for line in notes.splitlines() if text in line)
        start = line.index(text)
        assert start == 0 or not line[start - 1].isalnum() or text[0] == " "
    assert set(vocab.ids("\n")).isdisjoint(span.allowed([])), "an empty answer cannot end"


def test_answer_phrases_are_what_the_pages_hold_and_the_question_does_not():
    pages = ["| Place of birth | Kliashiaport |", "They were born in Kliashiaport.", "Organized by Braebax Collective."]
    assert answer_phrases("Pedres Broutrein was born in Kliashiaport, a city in Spain.", pages,
                          "In which city was Pedres Broutrein born?") == ["Kliashiaport"]
    assert answer_phrases("It is organized by Braebax Collective.", pages,
                          "Which organization organizes Ceisaem Summit?") == ["Braebax Collective"]
    assert answer_phrases("He was born in Paris.", pages, "In which city was Pedres Broutrein born?") == []
    assert page_phrases(pages[:2], "In which city was Pedres Broutrein born?") == ["Place of birth", "Kliashiaport",
                                                                                  "They"]
    assert yes_no("Was Pedres Broutrein born before 1950?") and not yes_no("Who founded Dimux Guild?")


def test_candidates_keep_the_kind_asked_for_numbers_whole_and_a_word_of_the_same_stem():
    """A year question picks among the pages' numbers even when the model's sentence named a year the pages do not
    hold; a who question among names; a number keeps its separators; ``biology`` names the page's ``biologist``."""
    page = ["Orel Vask\nOver the years the subject has been discussed in newspapers.\n| Founded by | Ann Lee |\n"
            "| Established | 1894 |\n| Profession | biologist |\n| Population | 994,100 |"]
    assert answer_kind("In what year was Orel Vask founded?") == "number" and answer_kind("Who founded X?") == "name"
    assert answer_kind("What is the occupation of X?") is None
    assert candidates("Orel Vask was founded in 1999.", page, "In what year was Orel Vask founded?") == ["1894", "994,100"]
    assert candidates("It was founded in 1992 by a group.", page, "Who founded Orel Vask?")[0] != "1992"
    assert all(p[0].isupper() for p in candidates("A group in 1992.", page, "Who founded Orel Vask?"))
    assert candidates("Its population is 994,100.", page, "What is the population of Orel Vask?") == ["994,100"]
    assert candidates("The occupation of Orel Vask is biology.", page, "What is the occupation of Orel Vask?") == [
        "biologist"]
    assert candidates("It is.", page, "Was Orel Vask founded before 1900?") == ["yes", "no"]


def _turn(name: str, arguments: dict, observation: list | None = None, error: str | None = None) -> TurnRecord:
    return TurnRecord(text="", tool_call=ToolCallRecord(name=name, arguments=arguments, observation=observation,
                                                        error=error))


def test_the_guide_searches_before_it_answers_then_reads_then_answers():
    trajectory = Trajectory(question="In which city was Pedres Broutrein born?")
    assert next_action(trajectory, final=True) == "search", "never an answer before a search"
    trajectory.turns.append(_turn("web_search", {"query": ["q"]}, error="backend down"))
    assert next_action(trajectory, final=False) == "search", "a failed search does not count"
    hits = [{"title": "Pedres Broutrein", "url": "https://w/a", "quick_summary": "s"},
            {"title": "Notable people", "url": "https://w/b", "quick_summary": "t"}]
    trajectory.turns.append(_turn("web_search", {"query": ["q"]}, [{"search_query": "q", "web_page_info_list": hits}]))
    assert next_action(trajectory, final=False) == "browse"
    assert unread_results(trajectory) == {"https://w/a": "Pedres Broutrein", "https://w/b": "Notable people"}
    trajectory.turns.append(_turn("browse_webpage", {"url_list": ["https://w/a"]}, [{"url": "https://w/a", "error": "x"}]))
    assert next_action(trajectory, final=False) == "browse" and list(unread_results(trajectory)) == ["https://w/b"]
    trajectory.turns.append(_turn("browse_webpage", {"url_list": ["https://w/b"]},
                                  [{"url": "https://w/b", "information": "born in Kliashiaport"}]))
    assert next_action(trajectory, final=False) == "answer"


@pytest.fixture(scope="module")
def random_smollm2(tmp_path_factory, smollm2_tokenizer):
    """A random one-layer model with the embedded SmolLM2's tokenizer and window: its prompts fit, it knows nothing."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("random-smollm2")
    config = LlamaConfig(vocab_size=len(smollm2_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192,
                         eos_token_id=smollm2_tokenizer.eos_token_id, pad_token_id=smollm2_tokenizer.pad_token_id)
    LlamaForCausalLM(config).save_pretrained(out)
    smollm2_tokenizer.save_pretrained(out)
    return out


async def test_a_guided_episode_of_a_random_model_searches_reads_and_answers_from_the_page(
        world_config, random_smollm2):
    """Even a random model, guided, writes well-formed turns: a search, a read of a search result, and an answer
    that is a phrase of the page's notes (the guide, not the model's training, keeps the protocol)."""
    from deepresearcher.agent.loop import RolloutTask
    from deepresearcher.agent.session import open_session
    from deepresearcher.world import load_tasks

    world = world_config.world.dir
    task = next(t for t in load_tasks(world, "test") if t.type == "hop1")
    config = load_config(None, [f"world.dir={world}", "world.size=small", f"cache_dir={world_config.cache_dir}",
                                "agent.guide=on", f"agent.policy=local:{random_smollm2}", "agent.max_turns=4"])
    async with open_session(config, decoding="eval") as session:
        assert session.guide is not None and "## Example" in session.template.system
        [trajectory] = await session.run([RolloutTask(question=task.question, golds=task.golds)])
    calls = [turn.tool_call for turn in trajectory.turns if turn.tool_call]
    assert trajectory.termination == "answer" and trajectory.format_errors == 0 and trajectory.metadata["guided"]
    assert [c.name for c in calls] == ["web_search", "browse_webpage"]
    assert calls[0].arguments["query"][0] in task.question
    hits = [h["url"] for entry in calls[0].observation for h in entry["web_page_info_list"]]
    assert calls[1].arguments["url_list"][0] in hits
    notes = " ".join(re.findall(r"\w+", calls[1].observation[0]["information"].lower()))
    assert trajectory.answer and " ".join(re.findall(r"\w+", trajectory.answer.lower())) in notes
    for segment in trajectory.segments:
        if segment.source == "policy":
            assert segment.logprobs is not None and len(segment.logprobs) == len(segment.token_ids)
