"""``reward.metric: deepresearcher`` on a real episode: the engine, the protocol's tools and the Qwen2.5 tokenizer.

The expected text is built independently of ``Trajectory.response_text``: the whole conversation decoded,
minus the original's initial prompt (system and user turn rendered with the generation prompt, no prefilled
``<think>``), exactly what the original's reward manager decoded. The engine and the scorer must agree with it.
"""

from __future__ import annotations

import pytest

from deepresearcher.agent.loop import run_rollouts
from deepresearcher.agent.protocols import get_protocol
from deepresearcher.agent.template import ChatTemplate
from deepresearcher.config import load_config
from deepresearcher.generate.scripted import ScriptedGenerator
from deepresearcher.reward import ANSWER_SPLIT, original_response, score_rollout
from deepresearcher.web.environment import WebEnvironment

SEARCH = ' I should search.</think>\n<tool_call>\n{"name": "web_search", "arguments": {"query": ["capital of France"]}}\n</tool_call>'


@pytest.mark.parametrize(("turns", "golds", "reward"), [
    ([SEARCH, " Found it.</think>\n<answer>Paris</answer>"], ["Paris", "City of Paris"], 1.0),
    ([SEARCH, " Found it.</think>\n<answer>The Paris</answer>"], ["Paris"], 2 / 3),
    ([" Easy.</think>\n<answer>Lyon</answer><answer>Paris</answer>"], ["Paris"], 0.0),
    ([SEARCH, SEARCH], ["Paris"], -1.0),  # max_turns: no answer
])
async def test_an_episode_earns_the_original_reward(qwen_tokenizer, world_config, reference_functions, turns, golds,
                                                    reward):
    original = reference_functions("verl/utils/reward_score/format_and_f1.py")
    config = load_config(overrides=["agent.protocol=deepresearcher", "reward.metric=deepresearcher", "agent.max_turns=2"])
    protocol = get_protocol("deepresearcher")
    template = ChatTemplate(qwen_tokenizer, protocol)
    env = WebEnvironment.from_config(world_config)
    question = "Which city is the capital of France? "
    try:
        (trajectory,) = await run_rollouts([question], ScriptedGenerator(qwen_tokenizer, turns),
                                           protocol.make_toolbox(env, world_config), qwen_tokenizer, config.agent,
                                           template=template)
    finally:
        await env.aclose()
    messages = [{"role": "system", "content": template.system}, {"role": "user", "content": question}]
    initial = qwen_tokenizer.apply_chat_template(messages, tools=protocol.tools, add_generation_prompt=True, tokenize=False)
    whole = qwen_tokenizer.decode(trajectory.all_ids, skip_special_tokens=False)
    assert whole.startswith(initial)
    decoded = whole[len(initial):]  # what the original's reward manager scored
    assert original_response(trajectory) == decoded
    scored = score_rollout(trajectory, golds, config=config.reward)
    assert scored.reward == pytest.approx(original.compute_score(decoded, ANSWER_SPLIT.join(golds))) == reward
