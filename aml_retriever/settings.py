"""Every setting of the service, in one table.

The CLI flags, the `AML_*` environment names, `config.example.json`, `print-config` and the
configuration table in the README are all derived from `SETTINGS`, so they cannot drift apart.
Precedence, lowest first: built-in default, JSON config file, environment, command-line flag.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aml_retriever.common.errors import InvalidField
from aml_retriever.common.signals import DEFAULT_WEIGHTS, SIGNAL_NAMES, RetrievalConfig

_RETRIEVAL = RetrievalConfig()


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    kind: type
    help: str
    secret: bool = False
    changes_index: bool = False  # part of the stored index identity: changing it needs `reindex`
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    @property
    def env(self) -> str:
        return ENV_ALIASES.get(self.name, "AML_" + self.name.upper())

    @property
    def flag(self) -> str:
        return "--db" if self.name == "db_path" else "--" + self.name.replace("_", "-")


SETTINGS: tuple[Setting, ...] = (
    Setting("host", "127.0.0.1", str, "address to bind"),
    Setting("port", 8080, int, "TCP port to bind (0 picks a free one)", minimum=0, maximum=65535),
    Setting("db_path", "./aml.db", str, "store path: the catalog file; user files live in PATH.users/ "
            "(made on first use; its folder must exist)"),
    Setting("api_key", "", str, "API key required on every endpoint but /health", secret=True),
    Setting("allow_unauthenticated", False, bool, "allow binding a non-loopback address without a key"),
    Setting("max_body_bytes", 1_048_576, int, "largest request body accepted (413 beyond)",
            minimum=1024),
    Setting("max_messages", 200, int, "most messages accepted in one Add (413 beyond)", minimum=1),
    Setting("processes", 1, int, "server processes sharing the port, one per core to use "
            "(each with its own workers and connections; 0 = one per core this machine lets "
            "the server use)", minimum=0, maximum=64),
    Setting("workers", 4, int, "request worker threads: active_requests of them run the service, "
            "the others answer /health, /metrics and the inspector's page at once (at least "
            "active_requests + 1 are started)", minimum=1),
    Setting("active_requests", 2, int, "requests processed at once; the others wait their turn, "
            "by user, holding their bytes and no thread (one process runs Python on one core: "
            "more only contend)", minimum=1),
    Setting("queue_size", 4096, int, "requests waiting for a turn (at most 256 MiB of them) before "
            "new ones get 429 with Retry-After", minimum=1),
    Setting("socket_timeout", 10.0, float, "seconds a new connection may stay idle; a request's "
            "head, then its body, must arrive within three times this", minimum=0.1),
    Setting("keep_alive_timeout", 75.0, float, "seconds an answered connection may wait for its "
            "next request before it is closed (longer than a client's own idle limit, so the "
            "client closes first and never sends on a connection being closed)", minimum=0.1),
    Setting("max_connections", 0, int, "client connections open at once; past it the oldest idle "
            "ones, then the slowest senders, are closed (0 = from the open-file limit: 794 at "
            "1,024)", minimum=0),
    Setting("synchronous", "FULL", str, "SQLite durability: FULL (power-safe) or NORMAL (crash-safe)",
            choices=("FULL", "NORMAL")),
    Setting("checkpoint_interval", 1.0, float, "seconds between planned WAL checkpoints",
            minimum=0.05),
    Setting("provenance", True, bool, "include view, source_message_ids and evidence_flags in results"),
    Setting("log_level", "INFO", str, "log level (content is never logged)",
            choices=("DEBUG", "INFO", "WARNING", "ERROR")),
    Setting("log_format", "TEXT", str, "log line format: TEXT (an access line is method, route, "
            "status, ms, request id) or JSON (one object per line, with the client's address and "
            "the answer's bytes); content is never logged", choices=("TEXT", "JSON")),
    Setting("signal_weights", "", str, "ranking signal weights as name=weight,... (0 = off; "
            f"others keep their defaults; signals: {', '.join(SIGNAL_NAMES)})"),
    Setting("default_max_words", 0, int, "word budget of a Search that sends no max_words "
            "(0 = none: top_k results)", minimum=0),
    Setting("answer_window_tokens", 0, int, "fill a reader's window of this many tokens: a "
            "Search answers its ranked evidence first, then the rest of the memory most likely to "
            "hold what the ranking missed, up to top_k items (0 = off: ranked evidence only; the "
            "leaderboard's reader: 117760)", minimum=0),
    Setting("reader_view", False, bool, "show each message an answer returns with the day and "
            "time it was said and its speaker, and the dates it gives relative to that day "
            "written out after it, for a reader that reads only the items' text (the "
            "leaderboard's; agents have created_at and role)"),
    Setting("held_megabytes", 64, int, "memory each server process keeps of "
            "the users it searched, for their next Searches, until a write changes them (least "
            "recently searched let go first; 0 = none: every Search reads all it needs)",
            minimum=0),
    Setting("candidate_depth", _RETRIEVAL.candidate_depth, int,
            "candidates each ranked list contributes (at least top_k)", minimum=1),
    Setting("hit_depth", _RETRIEVAL.hit_depth, int, "message hits read for each candidate "
            "wanted, for the windows and segments scored from them (times candidate_depth)",
            minimum=1),
    Setting("window_sizes", ",".join(map(str, _RETRIEVAL.window_sizes)), str,
            "sliding window sizes in messages, comma-separated"),
    Setting("segment_gap_minutes", _RETRIEVAL.segment_gap_minutes, float,
            "a silence this long starts a new session segment", changes_index=True, minimum=0.0),
    Setting("segment_max_messages", _RETRIEVAL.segment_max_messages, int,
            "most messages in one session segment", changes_index=True, minimum=1),
    Setting("proposed_statements", "FLAG", str, "MCP: whether recall and recent show statements "
            "an agent inferred and no person confirmed (FLAG: shown, marked proposed) or "
            "withhold them (WITHHOLD)", choices=("FLAG", "WITHHOLD")),
)
BY_NAME = {s.name: s for s in SETTINGS}
# The environment knows the store path as AML_DB_PATH, as the CLI knows it as --db.
ENV_ALIASES = {"db_path": "AML_DB_PATH"}
LAYERS = ("default", "file", "env", "flag")


@dataclass(frozen=True)
class Config:
    values: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)  # setting -> the layer it came from

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def with_values(self, **changed: Any) -> Config:
        """These settings with some values decided otherwise (`processes` 0 made a number)."""
        return Config({**self.values, **changed}, self.sources)

    def redacted(self) -> dict[str, Any]:
        """The settings as they may be printed: secrets replaced by a marker."""
        return {s.name: ("***" if s.secret and self.values[s.name] else self.values[s.name])
                for s in SETTINGS}

    def retrieval(self) -> RetrievalConfig:
        """The ranking configuration these settings describe."""
        return RetrievalConfig(
            weights={**DEFAULT_WEIGHTS, **parse_weights(self.values["signal_weights"])},
            candidate_depth=self.values["candidate_depth"],
            hit_depth=self.values["hit_depth"],
            window_sizes=parse_window_sizes(self.values["window_sizes"]),
            segment_gap_minutes=self.values["segment_gap_minutes"],
            segment_max_messages=self.values["segment_max_messages"])


def parse_weights(text: str) -> dict[str, float]:
    weights: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if name.strip() not in SIGNAL_NAMES:
            raise InvalidField(f"signal_weights names an unknown signal {name.strip()!r}; known: "
                               f"{', '.join(SIGNAL_NAMES)}", "signal_weights")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            raise InvalidField("signal_weights must be name=number pairs separated by commas",
                               "signal_weights") from None
        if weights[name.strip()] < 0:
            raise InvalidField("signal_weights must not be negative", "signal_weights")
    return weights


def parse_window_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise InvalidField("window_sizes must be whole numbers separated by commas",
                           "window_sizes") from None
    if any(size < 2 for size in sizes):
        raise InvalidField("window_sizes must each be at least 2", "window_sizes")
    return sizes


def coerce(setting: Setting, raw: Any) -> Any:
    """Turn a raw value (JSON, environment text or flag text) into the setting's type, or refuse
    it by name."""
    value: Any
    if setting.kind is bool:
        value = _boolean(setting, raw)
    elif setting.kind in (int, float):
        value = _number(setting, raw)
    else:
        if isinstance(raw, list) and setting.name == "window_sizes":
            raw = ",".join(map(str, raw))
        if not isinstance(raw, str):
            raise InvalidField(f"{setting.name} must be a string", setting.name)
        value = raw.strip().upper() if setting.choices else raw
        if setting.choices and value not in setting.choices:
            raise InvalidField(f"{setting.name} must be one of {', '.join(setting.choices)}",
                               setting.name)
    _VALIDATORS.get(setting.name, lambda v: v)(value)
    return value


def _boolean(setting: Setting, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if isinstance(raw, str) and raw.strip().lower() in ("0", "false", "no", "off", ""):
        return False
    raise InvalidField(f"{setting.name} must be true or false", setting.name)


def _number(setting: Setting, raw: Any) -> float:
    if isinstance(raw, bool):
        raise InvalidField(f"{setting.name} must be a number", setting.name)
    try:
        value = setting.kind(raw)
    except (TypeError, ValueError):
        raise InvalidField(f"{setting.name} must be a number", setting.name) from None
    if setting.minimum is not None and value < setting.minimum:
        raise InvalidField(f"{setting.name} must be at least {setting.minimum:g}", setting.name)
    if setting.maximum is not None and value > setting.maximum:
        raise InvalidField(f"{setting.name} must be at most {setting.maximum:g}", setting.name)
    return value


# Settings whose text has a structure of its own, checked when read (so at start-up).
_VALIDATORS = {"signal_weights": parse_weights, "window_sizes": parse_window_sizes}


def load(overrides: Mapping[str, Any] | None = None, config_file: str | None = None,
         environ: Mapping[str, str] | None = None) -> Config:
    """Resolve every setting: default, then config file, then environment, then overrides."""
    environ = os.environ if environ is None else environ
    values = {s.name: s.default for s in SETTINGS}
    sources = dict.fromkeys(values, "default")
    layers: list[tuple[str, Mapping[str, Any]]] = [
        ("file", read_config_file(config_file) if config_file else {}),
        ("env", {s.name: environ[s.env] for s in SETTINGS if s.env in environ}),
        ("flag", {k: v for k, v in (overrides or {}).items() if v is not None}),
    ]
    for layer, given in layers:
        for name, raw in given.items():
            values[name] = coerce(BY_NAME[name], raw)
            sources[name] = layer
    return Config(values, sources)


def read_config_file(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise InvalidField(f"config file {path} cannot be opened: {exc.strerror}", "config") from None
    except ValueError as exc:
        raise InvalidField(f"config file {path} is not valid JSON: {exc}", "config") from None
    if not isinstance(data, dict):
        raise InvalidField("config file must hold a JSON object", "config")
    unknown = sorted(set(data) - set(BY_NAME))
    if unknown:
        raise InvalidField(f"unknown setting {unknown[0]!r}; known: {', '.join(BY_NAME)}", "config")
    return data


def example_config() -> dict[str, Any]:
    """The content of config.example.json: every setting at its default, secrets empty."""
    return {s.name: s.default for s in SETTINGS}


def markdown_table() -> str:
    """The configuration table of the README, generated so it cannot drift from SETTINGS."""
    rows = ["| setting | flag | environment | default | meaning |", "|---|---|---|---|---|"]
    for s in SETTINGS:
        flag = f"`{s.flag}` / `--no-{s.flag[2:]}`" if s.kind is bool else f"`{s.flag}`"
        shown = str(s.default).lower() if s.kind is bool else s.default
        default = "none" if s.secret or s.default == "" else f"`{shown}`"
        meaning = s.help + (" (changes the index: `reindex`)" if s.changes_index else "")
        rows.append(f"| {s.name} | {flag} | `{s.env}` | {default} | {meaning} |")
    return "\n".join(rows)
