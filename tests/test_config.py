"""One typed config: YAML plus dotted overrides, every problem reported at once with a fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepresearcher.config import RECIPES_DIR, Config, apply_override, dump_config, load_config
from deepresearcher.errors import ConfigError

CONFIGS = sorted(RECIPES_DIR.glob("*.yaml"))


def test_defaults_and_dotted_overrides_parse_yaml_values() -> None:
    config = load_config(overrides=["search.top_k=5", "browse.only_searched_urls=true", "world.size=tiny"])
    assert (config.search.top_k, config.browse.only_searched_urls, config.world.size) == (5, True, "tiny")
    assert load_config().search.top_k == 10


def test_overriding_one_field_keeps_the_sections_other_defaults(tmp_path: Path) -> None:
    """A section whose default differs from its class's (backends.serper has a base_url and an api_key_env)
    keeps those defaults when one field is overridden, from YAML and from --set alike."""
    path = tmp_path / "c.yaml"
    path.write_text("backends:\n  serper:\n    base_url: http://127.0.0.1:9/\n  brave:\n    timeout_s: 3\n")
    from_yaml = load_config(path)
    from_set = load_config(overrides=["backends.serper.base_url=http://127.0.0.1:9/", "backends.brave.timeout_s=3"])
    for config in (from_yaml, from_set):
        serper, brave = config.backends.serper, config.backends.brave
        assert (serper.base_url, serper.api_key_env) == ("http://127.0.0.1:9/", "SERPER_API_KEY")
        assert (brave.timeout_s, brave.rate_per_s, brave.api_key_env) == (3.0, 1.0, "BRAVE_API_KEY")
    # what the user set is still told apart from defaults (eval reads this to pick a data file's benchmarks)
    assert load_config(overrides=["eval.limit=3"]).eval.model_fields_set == {"limit"}


def test_shipped_recipes_load_by_name_from_any_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--config quickstart` (or the docs' `configs/quickstart.yaml`) works outside the repository too."""
    monkeypatch.chdir(tmp_path)
    shipped = load_config(RECIPES_DIR / "quickstart.yaml")
    for name in ("quickstart", "quickstart.yaml", "configs/quickstart.yaml"):
        assert load_config(name) == shipped, name
    (tmp_path / "quickstart.yaml").write_text("search:\n  top_k: 4\n")
    assert load_config("quickstart.yaml").search.top_k == 4, "a file of that name here wins over the recipe"
    with pytest.raises(ConfigError, match="recipe shipped with deepresearcher: .*quickstart"):
        load_config("quickstrat")
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("elsewhere/quickstart.yaml")


def test_all_problems_are_reported_together_with_their_keys(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("search:\n  top_k: 0\n  topk: 3\nworld:\n  size: huge\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "3 problem(s)" in message
    assert "search.top_k" in message and "search.topk: unknown key" in message and "world.size" in message


@pytest.mark.parametrize(("override", "message"), [
    ("search.top_k", "not of the form"),
    ("search.top_k.deep=1", "is a value, not a section"),
])
def test_malformed_overrides_say_what_form_is_expected(override: str, message: str) -> None:
    data = {"search": {"top_k": 3}}
    with pytest.raises(ConfigError, match=message):
        apply_override(data, override)


def test_a_section_a_run_saved_unset_takes_an_override(tmp_path: Path) -> None:
    """A run's config.yaml writes an optional section left unset as ``null`` (``train.agent``); `eval --config
    runs/X/config.yaml --agent PROGRAM` sets a field inside it."""
    path = tmp_path / "config.yaml"
    path.write_text(dump_config(load_config("quickstart")))
    assert "  agent: null" in path.read_text()
    config = load_config(path, overrides=["train.agent.program=examples/openai_agent.py"])
    assert config.train.agent is not None and config.train.agent.program == "examples/openai_agent.py"


def test_missing_and_non_mapping_files_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(tmp_path / "list.yaml")


def test_resolved_config_round_trips_and_hash_tracks_changes(tmp_path: Path) -> None:
    config = load_config(overrides=["search.top_k=7"])
    (tmp_path / "resolved.yaml").write_text(dump_config(config))
    again = load_config(tmp_path / "resolved.yaml")
    assert again == config and again.config_hash() == config.config_hash()
    assert load_config().config_hash() != config.config_hash()


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_config_loads_and_validates(path: Path) -> None:
    assert isinstance(load_config(path), Config)


def test_generated_reference_is_current() -> None:
    """docs/config.md is regenerated from the field declarations; a new field without it fails here."""
    from deepresearcher.config_docs import config_reference

    reference = Path(__file__).parents[1] / "docs" / "config.md"
    assert reference.read_text() == config_reference(), "run: deepresearcher config docs > docs/config.md"
    for name in Config.model_fields:
        assert f"`{name}" in reference.read_text()
