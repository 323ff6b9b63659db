"""A research agent written with the OpenAI SDK, nothing of deepresearcher's: it asks the model, runs the tools the
model calls (plain HTTP), and prints the model's final answer. `deepresearcher eval --agent` and `train.agent` run it
unchanged, with OPENAI_BASE_URL / OPENAI_API_KEY / OPENAI_MODEL and DEEPRESEARCHER_TOOLS_URL set for each episode.

    python examples/openai_agent.py "In which city was Pedres Broutrein born?"
"""

import json
import os
import sys
from urllib.request import Request, urlopen

from openai import OpenAI


def post(url, body):
    request = Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urlopen(request, timeout=300) as response:
        return json.load(response)


question = sys.argv[-1]
client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
tools_url = os.environ["DEEPRESEARCHER_TOOLS_URL"]
tools = json.load(urlopen(tools_url))["tools"]
messages = [{"role": "user", "content": question}]
for _ in range(10):
    reply = client.chat.completions.create(model=os.environ.get("OPENAI_MODEL", "policy"), messages=messages,
                                           tools=tools).choices[0].message
    messages.append(reply)
    if not reply.tool_calls:
        print(reply.content)
        break
    for call in reply.tool_calls:
        result = post(f"{tools_url}/{call.function.name}", json.loads(call.function.arguments))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result["text"]})
