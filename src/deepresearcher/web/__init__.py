"""The web environment: search backends, page sources, readers, the cache, and the handler service.

``make_environment(config)`` is the one entry point rollouts use: the handler service's failover
client when ``env.server_urls`` is set, else the in-process ``WebEnvironment``. Both implement
``deepresearcher.web.interface.Environment``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deepresearcher.config import Config
    from deepresearcher.web.interface import Environment


def make_environment(config: Config) -> Environment:
    """The environment the config asks for: remote handler services, or in process."""
    if config.env.server_urls:
        from deepresearcher.web.client import make_remote_environment

        return make_remote_environment(config)
    from deepresearcher.web.environment import WebEnvironment

    return WebEnvironment.from_config(config)


__all__ = ["make_environment"]
