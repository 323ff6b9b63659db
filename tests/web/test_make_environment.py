"""One interface for rollouts: the tools answer the same through a handler service as in process."""

from __future__ import annotations

import orjson

from deepresearcher.agent.tools import ToolBox, ToolContext
from deepresearcher.testing.handlers import handler_thread
from deepresearcher.web import make_environment
from deepresearcher.web.client import RemoteEnvironment
from deepresearcher.web.environment import WebEnvironment
from deepresearcher.web.server import create_app
from deepresearcher.world import load_tasks


async def _observations(config, task) -> tuple[type, list]:
    env = make_environment(config)
    try:
        tools, context = ToolBox(env, config), ToolContext(task.question)
        searched = await tools.call("web_search", {"query": [task.chain[0].query]}, context)
        read = await tools.call("browse_webpage", {"url_list": task.evidence_urls[:1]}, context)
        return type(env), [orjson.loads(searched.text), orjson.loads(read.text)]
    finally:
        await env.aclose()


async def test_remote_and_in_process_environments_give_identical_observations(world_config, small_world) -> None:
    task = next(t for t in load_tasks(small_world, "test") if t.type == "hop2")
    local_type, local = await _observations(world_config, task)
    with handler_thread(create_app(world_config)) as url:
        remote_config = world_config.model_copy(deep=True)
        remote_config.env.server_urls = [url]
        remote_type, remote = await _observations(remote_config, task)
    assert (local_type, remote_type) == (WebEnvironment, RemoteEnvironment)
    assert remote == local
    assert task.chain[0].value in orjson.dumps(local[1]).decode()


async def test_a_handler_preloads_its_local_index_as_it_starts(world_config, caplog) -> None:
    """The handler warms the local index's postings before it answers (its first queries then do not wait
    on the disk): the environment reads them, and the start says how much."""
    import logging

    caplog.set_level(logging.INFO, logger="deepresearcher.web.server")
    with handler_thread(create_app(world_config)):
        pass
    assert any("postings preloaded" in record.getMessage() for record in caplog.records)
    env = WebEnvironment.from_config(world_config)
    try:
        assert env.preload() > 0
    finally:
        await env.aclose()


async def test_a_local_environment_opens_its_index_once(world_config, small_world, monkeypatch) -> None:
    """The search backend and the page store share one opened index (opening one reads its store)."""
    from deepresearcher.web.backends import local

    opened: list[object] = []
    real_init = local.LocalIndex.__init__

    def counting_init(self, *args, **kwargs) -> None:
        opened.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(local.LocalIndex, "__init__", counting_init)
    env = WebEnvironment.from_config(world_config)
    try:
        assert len(opened) == 1
        assert env.backend.index is env.pages.index is opened[0]
        task = load_tasks(small_world, "test")[0]
        assert (await env.search([task.chain[0].query]))[0].hits
    finally:
        await env.aclose()


def test_every_configurable_reader_is_registered_and_builds_by_name(world_config) -> None:
    """``browse.reader`` accepts exactly the registry's names; each model-free one builds the reader it names."""
    from typing import get_args

    from deepresearcher.config import BrowseConfig
    from deepresearcher.web.reader import READERS, RECORDED_READERS, make_reader

    assert set(get_args(BrowseConfig.model_fields["reader"].annotation)) == set(READERS)
    assert RECORDED_READERS == {"llm", "deepresearcher"} and RECORDED_READERS <= set(READERS)
    for name in ("extractive", "raw"):
        config = world_config.model_copy(deep=True)
        config.browse.reader = name
        assert make_reader(config).name == name
