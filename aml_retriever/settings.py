"""Every setting of the service, in one table.

The CLI flags, the `AML_*` environment names, `config.example.json` and the configuration table in
the README are all derived from `SETTINGS`, so they cannot drift apart. Precedence, lowest first:
built-in default, JSON config file, environment, command-line flag.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aml_retriever.errors import InvalidField


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    kind: type
    help: str
    secret: bool = False

    @property
    def env(self) -> str:
        return "AML_" + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


SETTINGS: tuple[Setting, ...] = (
    Setting("host", "127.0.0.1", str, "address to bind"),
    Setting("port", 8080, int, "TCP port to bind (0 picks a free one)"),
    Setting("db_path", "./aml.db", str, "store path: the catalog file; user shards live beside it"),
    Setting("api_key", "", str, "API key required on every endpoint but /health", secret=True),
    Setting("allow_unauthenticated", False, bool, "allow binding a non-loopback address without a key"),
    Setting("max_body_bytes", 1_048_576, int, "largest request body accepted (413 beyond)"),
    Setting("max_messages", 200, int, "most messages accepted in one Add (413 beyond)"),
    Setting("workers", 16, int, "request worker threads (bounded concurrency)"),
    Setting("queue_size", 64, int, "connections waiting for a worker before new ones get 503"),
    Setting("socket_timeout", 10.0, float, "seconds a connection may stay idle or stall mid-request"),
    Setting("synchronous", "FULL", str, "SQLite synchronous mode: FULL (power-safe) or NORMAL"),
    Setting("checkpoint_interval", 1.0, float, "seconds between planned WAL checkpoints"),
    Setting("provenance", True, bool, "include view, source_message_ids and evidence_flags in results"),
    Setting("log_level", "INFO", str, "DEBUG, INFO, WARNING or ERROR (content is never logged)"),
)
BY_NAME = {s.name: s for s in SETTINGS}
# The CLI and the environment know the store path as `db`, as users type it.
ENV_ALIASES = {"db_path": "AML_DB_PATH"}
CHOICES = {"synchronous": ("FULL", "NORMAL"), "log_level": ("DEBUG", "INFO", "WARNING", "ERROR")}
MINIMUMS = {"port": 0, "max_body_bytes": 1024, "max_messages": 1, "workers": 1, "queue_size": 1,
            "socket_timeout": 0.1, "checkpoint_interval": 0.05}


@dataclass(frozen=True)
class Config:
    values: Mapping[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def redacted(self) -> dict[str, Any]:
        """The settings as they may be printed: secrets replaced by a marker."""
        return {s.name: ("***" if s.secret and self.values[s.name] else self.values[s.name])
                for s in SETTINGS}


def coerce(setting: Setting, raw: Any) -> Any:
    """Turn a raw value (JSON, environment text or flag text) into the setting's type, or refuse."""
    value: Any
    if setting.kind is bool:
        if isinstance(raw, bool):
            value = raw
        elif isinstance(raw, str) and raw.strip().lower() in ("1", "true", "yes", "on"):
            value = True
        elif isinstance(raw, str) and raw.strip().lower() in ("0", "false", "no", "off", ""):
            value = False
        else:
            raise InvalidField(f"{setting.name} must be true or false", setting.name)
    elif setting.kind in (int, float):
        if isinstance(raw, bool):
            raise InvalidField(f"{setting.name} must be a number", setting.name)
        try:
            value = setting.kind(raw)
        except (TypeError, ValueError):
            raise InvalidField(f"{setting.name} must be a number", setting.name) from None
        if value < MINIMUMS.get(setting.name, 0):
            raise InvalidField(f"{setting.name} must be at least {MINIMUMS.get(setting.name, 0)}",
                               setting.name)
    else:
        if not isinstance(raw, str):
            raise InvalidField(f"{setting.name} must be a string", setting.name)
        value = raw
    if setting.name in CHOICES:
        value = str(value).upper()
        if value not in CHOICES[setting.name]:
            raise InvalidField(f"{setting.name} must be one of {', '.join(CHOICES[setting.name])}",
                               setting.name)
    return value


def env_name(setting: Setting) -> str:
    return ENV_ALIASES.get(setting.name, setting.env)


def load(overrides: Mapping[str, Any] | None = None, config_file: str | None = None,
         environ: Mapping[str, str] | None = None) -> Config:
    """Resolve every setting: default, then config file, then environment, then overrides."""
    environ = os.environ if environ is None else environ
    values = {s.name: s.default for s in SETTINGS}
    if config_file:
        values.update(read_config_file(config_file))
    for s in SETTINGS:
        if env_name(s) in environ:
            values[s.name] = coerce(s, environ[env_name(s)])
    for name, raw in (overrides or {}).items():
        if raw is not None:
            values[name] = coerce(BY_NAME[name], raw)
    return Config(values)


def read_config_file(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise InvalidField(f"config file cannot be read as JSON: {exc}", "config") from None
    if not isinstance(data, dict):
        raise InvalidField("config file must hold a JSON object", "config")
    unknown = sorted(set(data) - set(BY_NAME))
    if unknown:
        raise InvalidField(f"unknown setting {unknown[0]!r}; known: {', '.join(BY_NAME)}", "config")
    return {name: coerce(BY_NAME[name], raw) for name, raw in data.items()}


def example_config() -> dict[str, Any]:
    """The content of config.example.json: every setting at its default, secrets empty."""
    return {s.name: s.default for s in SETTINGS}
