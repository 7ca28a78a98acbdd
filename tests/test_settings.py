"""Settings come from one table; the example config and the README cannot drift from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aml_retriever.errors import InvalidField
from aml_retriever.settings import SETTINGS, env_name, example_config, load

ROOT = Path(__file__).resolve().parent.parent


def test_config_example_matches_the_settings_table():
    assert json.loads((ROOT / "config.example.json").read_text()) == example_config()


def test_readme_configuration_table_lists_every_setting_with_its_env_name():
    readme = (ROOT / "README.md").read_text()
    for setting in SETTINGS:
        assert f"| {setting.name} |" in readme, setting.name
        assert f"`{env_name(setting)}`" in readme, setting.name


def test_precedence_is_default_file_environment_flag(tmp_path):
    config_file = tmp_path / "c.json"
    config_file.write_text(json.dumps({"port": 1111, "workers": 3, "log_level": "debug"}))
    config = load({"workers": 5}, str(config_file), environ={"AML_PORT": "2222"})
    assert (config.port, config.workers, config.log_level, config.host) == (2222, 5, "DEBUG", "127.0.0.1")


@pytest.mark.parametrize("content,field", [
    ({"prot": 1}, "config"), ({"port": "x"}, "port"), ({"workers": 0}, "workers"),
    ({"synchronous": "OFF"}, "synchronous"), ({"provenance": "maybe"}, "provenance"),
])
def test_bad_config_is_refused_by_name(tmp_path, content, field):
    config_file = tmp_path / "c.json"
    config_file.write_text(json.dumps(content))
    with pytest.raises(InvalidField) as exc:
        load(config_file=str(config_file), environ={})
    assert exc.value.field == field


def test_secrets_are_redacted_when_printed():
    assert load({"api_key": "s3cret"}, environ={}).redacted()["api_key"] == "***"
