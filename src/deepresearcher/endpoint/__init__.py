"""The policy as an OpenAI chat-completions endpoint, every episode recorded token by token for training.

``render`` (messages to prompt ids through the policy's own chat template; sampled text to ``tool_calls``),
``episodes`` (the recorder, the drift rule and the trajectories stitched from an episode), ``openai_types`` (the
wire format and OpenAI's errors), ``app`` (the FastAPI routes, ``PolicyEndpoint``), ``server`` (``serve --policy``,
and loopback servers for a trainer).
"""

from deepresearcher.endpoint.app import PolicyEndpoint, SamplingDefaults, create_app, episode_base_url
from deepresearcher.endpoint.episodes import Episode, EpisodeRecorder, Exchange
from deepresearcher.endpoint.render import ChatLayout, ChatRenderer
from deepresearcher.endpoint.server import LoopbackServer, ThreadedServer, endpoint_for, serve_policy

__all__ = [
    "ChatLayout",
    "ChatRenderer",
    "Episode",
    "EpisodeRecorder",
    "Exchange",
    "LoopbackServer",
    "PolicyEndpoint",
    "SamplingDefaults",
    "ThreadedServer",
    "create_app",
    "endpoint_for",
    "episode_base_url",
    "serve_policy",
]
