"""The chat template layer: exact prompt ids, observation deltas, and clear errors."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from deepresearcher.agent.protocols import NATIVE
from deepresearcher.agent.template import THINK_OPEN, ChatTemplate
from deepresearcher.errors import ChatTemplateError

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "Search the web.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "array", "items": {"type": "string"}}},
                "required": ["query"],
            },
        },
    }
]
ONE_TOOL = dataclasses.replace(NATIVE, tools=TOOLS)


def test_prompt_is_the_templates_own_rendering_plus_think(tokenizer):
    """The prompt is exactly what apply_chat_template renders, with today's date, the tools and <think>."""
    template = ChatTemplate(tokenizer, ONE_TOOL, today=dt.date(2025, 4, 3))
    text = template.prompt_text("Who wrote Hamlet?")
    assert text.endswith(THINK_OPEN)
    assert "Today is 2025-04-03" in text and '"web_search"' in text and "Who wrote Hamlet?" in text
    assert tokenizer.decode(template.encode(text)) == text
    assert template.prompt_ids("Who wrote Hamlet?") == template.encode(text)
    assert template._prompt_head_ids, "the shared system part should be tokenized once"


def test_observation_delta_matches_full_render(tokenizer):
    """Prompt + sampled turn + observation delta decodes to the template's rendering of the whole conversation."""
    template = ChatTemplate(tokenizer, ONE_TOOL)
    sampled_text = ' I should search.</think>\n<tool_call>\n{"name": "web_search", "arguments": {"query": ["x"]}}\n</tool_call>'
    sampled = template.encode(sampled_text)
    observation = "hits for x"
    ids = template.encode(template.prompt_text("Q?")) + sampled
    ids += template.encode(template.observation_text(observation, sampled))
    tool_msg = (
        {"role": "tool", "content": observation}
        if template.supports_tools
        else {"role": "user", "content": f"<tool_response>\n{observation}\n</tool_response>"}
    )
    messages = [
        {"role": "system", "content": template.system},
        {"role": "user", "content": "Q?"},
        {"role": "assistant", "content": THINK_OPEN + sampled_text},
        tool_msg,
    ]
    full = tokenizer.apply_chat_template(
        messages, tools=TOOLS if template.supports_tools else None, tokenize=False, add_generation_prompt=True
    )
    assert tokenizer.decode(ids) == full + THINK_OPEN


def test_sampled_eos_is_not_repeated(tokenizer):
    """When the model sampled the end-of-turn token itself, the delta does not add a second one."""
    template = ChatTemplate(tokenizer, ONE_TOOL)
    sampled = template.encode("no action") + [tokenizer.eos_token_id]
    delta = template.observation_text("err", sampled)
    without_eos = template.observation_text("err", sampled[:-1])
    assert without_eos.startswith(tokenizer.eos_token)
    assert without_eos == tokenizer.eos_token + delta


def test_qwen_uses_tool_role_and_smollm2_falls_back(qwen_tokenizer, smollm2_tokenizer):
    """Qwen2.5's template renders tools itself; SmolLM2 gets them in the system prompt and a user tool turn."""
    qwen = ChatTemplate(qwen_tokenizer, ONE_TOOL)
    smol = ChatTemplate(smollm2_tokenizer, ONE_TOOL)
    assert qwen.supports_tools and not smol.supports_tools
    assert "<tools>" in smol.system and "<tools>" not in qwen.system
    assert qwen.observation_text("OBS", []).startswith("<|im_end|>\n<|im_start|>user\n<tool_response>\nOBS")
    assert smol.observation_text("OBS", []).startswith("<|im_end|>\n<|im_start|>user\n<tool_response>\nOBS")


def test_tokenizer_without_chat_template_is_a_clear_error(qwen_tokenizer):
    """A base model's tokenizer (no chat template) is refused with a message saying what to do."""
    import copy

    bare = copy.copy(qwen_tokenizer)
    bare.chat_template = None
    with pytest.raises(ChatTemplateError, match="no chat template"):
        ChatTemplate(bare, ONE_TOOL)


def test_replacing_the_system_turn_rebuilds_the_cached_prompt(qwen_tokenizer):
    """Setting ``system`` after construction changes every later prompt (the cached shared part follows)."""
    template = ChatTemplate(qwen_tokenizer, ONE_TOOL)
    template.system = "Be brief."
    text = template.prompt_text("Q?")
    assert "Be brief." in text and "Today is" not in text
    assert template.prompt_ids("Q?") == template.encode(text)
    assert ChatTemplate(qwen_tokenizer, ONE_TOOL, system="Be brief.").prompt_text("Q?") == text
