"""The web environment: search backends, page sources, readers, the cache, and the handler service.

``make_environment(config)`` is the one entry point rollouts use: the handler service's failover
client when ``env.server_urls`` is set, else the in-process ``WebEnvironment``; either behind
``LatencyEnvironment`` when ``env.latency`` adds delays or records latencies. All implement
``deepresearcher.web.interface.Environment``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deepresearcher.config import Config
    from deepresearcher.web.interface import Environment


def make_environment(config: Config) -> Environment:
    """The environment the config asks for: remote handler services, or in process; slowed or recorded
    by ``env.latency`` (on this side of the wire, so a handler fleet's calls wait once, in the client)."""
    env: Environment
    if config.env.server_urls:
        from deepresearcher.web.client import make_remote_environment

        env = make_remote_environment(config)
    else:
        from deepresearcher.web.environment import WebEnvironment

        env = WebEnvironment.from_config(config)
    if not config.env.latency.active:
        return env
    from deepresearcher.web.latency import LatencyEnvironment

    return LatencyEnvironment(env, config.env.latency)


__all__ = ["make_environment"]
