"""A research agent written with the OpenAI Agents SDK, its tools over MCP, nothing of deepresearcher's.
`deepresearcher eval --agent` and `train.agent` run it unchanged, with OPENAI_BASE_URL / OPENAI_API_KEY /
OPENAI_MODEL and DEEPRESEARCHER_MCP_URL set for each episode.

    python examples/agents_sdk_agent.py "In which city was Pedres Broutrein born?"
"""

import asyncio
import os
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI


async def main(question: str) -> None:
    set_tracing_disabled(True)  # nothing leaves the machine
    tools = MCPServerStreamableHttp({"url": os.environ["DEEPRESEARCHER_MCP_URL"]}, client_session_timeout_seconds=300)
    async with tools:
        model = OpenAIChatCompletionsModel(os.environ.get("OPENAI_MODEL", "policy"), AsyncOpenAI())
        agent = Agent(name="researcher", model=model, mcp_servers=[tools])  # no instructions: the policy's own
        result = await Runner.run(agent, question, max_turns=10)
    print(result.final_output)


asyncio.run(main(sys.argv[-1]))
