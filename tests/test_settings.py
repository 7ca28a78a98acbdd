"""Settings come from one table; the example config and the README cannot drift from it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aml_retriever.cli import COMMANDS
from aml_retriever.common.errors import InvalidField
from aml_retriever.settings import SETTINGS, example_config, load, markdown_table

ROOT = Path(__file__).resolve().parent.parent


def test_config_example_matches_the_settings_table():
    assert json.loads((ROOT / "config.example.json").read_text()) == example_config()


def test_readme_configuration_table_is_the_generated_one():
    assert markdown_table() in (ROOT / "README.md").read_text()


def test_chinese_readme_has_the_same_commands_and_settings():
    english = (ROOT / "README.md").read_text()
    chinese = (ROOT / "README.zh.md").read_text()
    for setting in SETTINGS:
        for text in (f"| {setting.name} |", f"`{setting.env}`", f"`{setting.flag}"):
            assert (text in english) and (text in chinese), text
    commands = set(re.findall(r"(?m)^(?:\./scripts/\S+|python3 -m aml_retriever \S+|curl .*)", english))
    assert commands and all(command in chinese for command in commands)
    for command in COMMANDS:  # every command of the CLI, in both READMEs
        assert f"`{command}" in english and f"`{command}" in chinese, command


def test_precedence_is_default_file_environment_flag(tmp_path):
    config_file = tmp_path / "c.json"
    config_file.write_text(json.dumps({"port": 1111, "workers": 3, "log_level": "debug"}))
    config = load({"workers": 5}, str(config_file), environ={"AML_PORT": "2222"})
    assert (config.port, config.workers, config.log_level, config.host) == (2222, 5, "DEBUG", "127.0.0.1")


@pytest.mark.parametrize("content,field", [
    ({"prot": 1}, "config"), ({"port": "x"}, "port"), ({"workers": 0}, "workers"),
    ({"synchronous": "OFF"}, "synchronous"), ({"provenance": "maybe"}, "provenance"),
    ({"signal_weights": "bogus=1"}, "signal_weights"), ({"signal_weights": "date=x"}, "signal_weights"),
    ({"window_sizes": "1"}, "window_sizes"), ({"window_sizes": "a,b"}, "window_sizes"),
    ({"segment_max_messages": 0}, "segment_max_messages"),
])
def test_bad_config_is_refused_by_name(tmp_path, content, field):
    config_file = tmp_path / "c.json"
    config_file.write_text(json.dumps(content))
    with pytest.raises(InvalidField) as exc:
        load(config_file=str(config_file), environ={})
    assert exc.value.field == field


def test_secrets_are_redacted_when_printed():
    assert load({"api_key": "s3cret"}, environ={}).redacted()["api_key"] == "***"


def test_settings_describe_the_retrieval_configuration():
    config = load({"signal_weights": "date=2, window=0", "window_sizes": "3,2"}, environ={})
    retrieval = config.retrieval()
    assert retrieval.weight("date") == 2.0 and retrieval.weight("window") == 0.0
    assert retrieval.weight("lexical") == 1.0  # unnamed signals keep their defaults
    assert retrieval.window_sizes == (2, 3)


def test_print_config_names_the_layer_of_every_value(tmp_path, capsys):
    from aml_retriever.cli import main

    config_file = tmp_path / "c.json"
    config_file.write_text(json.dumps({"workers": 3, "api_key": "s3cret"}))
    assert main(["print-config", "--config", str(config_file), "--port", "9"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["port"] == {"value": 9, "from": "flag"}
    assert shown["workers"] == {"value": 3, "from": "file"}
    assert shown["api_key"] == {"value": "***", "from": "file"}
    assert shown["host"] == {"value": "127.0.0.1", "from": "default"}


def test_a_refused_setting_is_named_a_usage_error_as_a_flag_and_exit_1_in_a_file(capsys, tmp_path):
    from aml_retriever.cli import main

    with pytest.raises(SystemExit) as exited:  # a flag's value: usage, as `--workers x` is
        main(["print-config", "--workers", "0"])
    assert exited.value.code == 2 and "workers must be at least 1" in capsys.readouterr().err
    config_file = tmp_path / "c.json"
    config_file.write_text(json.dumps({"workers": 0}))
    assert main(["print-config", "--config", str(config_file)]) == 1
    assert "workers must be at least 1" in capsys.readouterr().err


def test_serve_help_groups_every_setting_once(capsys):
    """`serve --help` was 150 flat lines: each setting's flag now sits under one group."""
    from aml_retriever.cli import SETTING_GROUPS, main

    grouped = [name for _, names in SETTING_GROUPS for name in names]
    assert sorted(grouped) == sorted(s.name for s in SETTINGS) and len(grouped) == len(set(grouped))
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = capsys.readouterr().out
    for title, names in SETTING_GROUPS:
        section = shown.split(f"\n{title}:\n", 1)[1].split("\n\n", 1)[0]
        flags = {s.flag for s in SETTINGS if s.name in names}
        assert all(flag in section for flag in flags), title
    assert len(shown.split("\n\n", 1)[0].splitlines()) == 1  # a usage line, not thirty
