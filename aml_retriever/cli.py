"""The command line: `python3 -m aml_retriever <command>`, or `aml-retriever <command>` once
`pip install .` has put that console script on PATH. Parses, calls, prints.

Exit codes: 0 success; 1 the command could not do its work (the reason on stderr: a refused
setting, a store in use or written by another version); 2 a usage error (unknown command or flag,
a missing confirmation).
"""

from __future__ import annotations

import argparse
import difflib
import errno
import json
import logging
import os
import re
import resource
import shutil
import sqlite3
import sys
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, NoReturn

from aml_retriever import __version__
from aml_retriever.agents import registration
from aml_retriever.agents.scopes import (
    MEMORY_USER,
    STORE_NAME,
    ScopedMemory,
    default_global_root,
    event_of,
    memory_retrieval,
    statement_id,
    statement_of,
)
from aml_retriever.analysis.tokenizer import FTS_TOKENIZE
from aml_retriever.common.errors import AmlError, InvalidField
from aml_retriever.http import logs
from aml_retriever.memory import exchange
from aml_retriever.memory.lifecycle import Statements
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import parse_user
from aml_retriever.progress import Progress
from aml_retriever.settings import SETTINGS, Config, Setting, coerce, load, parse_weights
from aml_retriever.storage import audit
from aml_retriever.storage.backup import backup
from aml_retriever.storage.store import Store
from aml_retriever.storage.user_files import QUARANTINE

MIN_PYTHON = (3, 11)
# Below this open-file limit a server's sockets and user files crowd each other out (app.py
# sizes the idle files from what is left: at 256 it keeps 46 open).
MIN_OPEN_FILES = 256
EXIT_CODES = "exit codes: 0 success, 1 could not do its work (reason on stderr), 2 usage error"
# How help names the program: as started from a checkout, or as the console script that
# `pip install .` makes (pyproject.toml's [project.scripts] calls `console`).
MODULE_PROG = "python3 -m aml_retriever"
CONSOLE_PROG = "aml-retriever"


# The settings `mcp` reads (the ranking, durability, logs, proposals); the HTTP server's own
# (host, port, key, limits, workers) mean nothing to it and are not offered as its flags.
MCP_SETTINGS = frozenset({"synchronous", "log_level", "log_format", "signal_weights",
                          "candidate_depth", "hit_depth", "window_sizes", "segment_gap_minutes",
                          "segment_max_messages", "proposed_statements"})


# How `serve --help` groups the settings (each once; a test holds them to SETTINGS).
SETTING_GROUPS = (
    ("where it listens and who may call", ("host", "port", "api_key", "allow_unauthenticated")),
    ("the store", ("db_path", "synchronous", "checkpoint_interval", "held_megabytes")),
    ("load: processes, threads, queues, timeouts",
     ("processes", "workers", "active_requests", "queue_size", "socket_timeout",
      "keep_alive_timeout", "max_connections")),
    ("requests", ("max_body_bytes", "max_messages", "default_max_words", "provenance",
                  "proposed_statements")),
    ("the leaderboard's reader", ("answer_window_tokens", "reader_view")),
    ("ranking (changing the index's settings needs `reindex`)",
     ("signal_weights", "candidate_depth", "hit_depth", "window_sizes", "segment_gap_minutes",
      "segment_max_messages")),
    ("logs", ("log_level", "log_format")),
)


class Parser(argparse.ArgumentParser):
    """Usage errors in one line (the full usage of `serve` is 25 lines): what is wrong, and where
    to read more."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}{self._suggestion(message)} "
                     f"(see {self.prog} --help)\n")

    def _suggestion(self, message: str) -> str:
        """For an option no command takes, the nearest one that some command does ("--prot":
        did you mean --port?)."""
        if not message.startswith("unrecognized arguments:"):
            return ""
        known = set(self._option_string_actions)
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for command in action.choices.values():
                    known |= set(command._option_string_actions)
        for word in message.split(":", 1)[1].split():
            if word.startswith("--"):
                close = difflib.get_close_matches(word.split("=")[0], sorted(known), n=1, cutoff=0.75)
                if close:
                    return f"; did you mean {close[0]}?"
        return ""


def _positive(text: str) -> int:
    """A whole number of at least 1 from the command line (digits counted before conversion)."""
    if not text.isascii() or not text.isdigit() or len(text) > 18 or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return int(text)


def _within(low: int, high: int) -> Callable[[str], int]:
    """A whole number from `low` to `high` from the command line."""
    def parse(text: str) -> int:
        if not text.isascii() or not text.isdigit() or len(text) > 18 or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high}, not {text!r}")
        return int(text)
    return parse


def _seconds(text: str) -> float:
    """A positive number of seconds from the command line."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text!r}")
    return value


def _url(text: str) -> str:
    """A server's base URL: http(s)://host[:port][/path]."""
    try:
        parts = urllib.parse.urlsplit(text)
        good = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is not a number, or out of range
        good = False
    if not good:
        raise argparse.ArgumentTypeError(f"must be an http(s) URL such as http://127.0.0.1:8080, "
                                         f"not {text!r}")
    return text


def _add_setting(parser: argparse.ArgumentParser | argparse._ArgumentGroup, setting: Setting) -> None:
    default = "none" if setting.secret else repr(setting.default)
    help_text = f"{setting.help} (env {setting.env}; default {default})"
    if setting.changes_index:
        help_text += "; changing it needs `reindex`"
    if setting.kind is bool:
        parser.add_argument(setting.flag, dest=setting.name, action=argparse.BooleanOptionalAction,
                            default=None, help=help_text)
    else:
        parser.add_argument(setting.flag, dest=setting.name, type=_flag_value(setting),
                            default=None, metavar=setting.name.upper(), help=help_text)


def _flag_value(setting: Setting) -> Callable[[str], Any]:
    """A setting's value given as a flag, checked as a config file's is: a value out of range is
    a usage error as one that is no number is (`--port 70000` and `--port abc` both exit 2)."""
    def parse(text: str) -> Any:
        try:
            return coerce(setting, text)
        except InvalidField as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def _command(commands: Any, name: str, summary: str, description: str,
             example: str) -> argparse.ArgumentParser:
    return commands.add_parser(name, help=summary, description=description,
                               epilog=f"example:\n  {example}\n\n{EXIT_CODES}",
                               formatter_class=argparse.RawDescriptionHelpFormatter)


def _store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="store path (env AML_DB_PATH; default ./aml.db)")
    parser.add_argument("--config", help="JSON file of settings (see config.example.json)")


def _read_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True, help="the store: an HTTP store's catalog "
                        "(./aml.db) or an agent memory (DIR/.aml/memory.db)")
    parser.add_argument("--user", default=MEMORY_USER,
                        help=f"the user_id (default {MEMORY_USER}: an agent memory's one user)")


def _memory_roots(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project-root",
                        help="the project whose local memory this is (DIR/.aml/memory.db; "
                             "default: the client's first root when it offers roots, else the "
                             "directory the client starts the server in, which coding clients "
                             "make the project's)")
    parser.add_argument("--global-root",
                        help="where the account's global memory lives (default: the platform's "
                             f"user data directory, here {default_global_root()})")


def _rehearse_options(parser: argparse.ArgumentParser) -> None:
    """The flags of `rehearse`; their defaults are rehearsal.Settings' (a test holds them equal)."""
    parser.add_argument("--url", type=_url, help="the server's base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--api-key", metavar="KEY",
                        help="sent as Authorization: Bearer KEY (default: env AML_API_KEY)")
    parser.add_argument("--data", action="append", metavar="DIR_OR_FILE",
                        help="replay files, conversations with evidence texts or aml-eval/1 "
                        "datasets; a directory stands for its *.json files; repeatable")
    parser.add_argument("--add-concurrency", type=_within(1, 1024), default=64, metavar="N",
                        help="Adds in flight at most (the platform: 16-64; default 64)")
    parser.add_argument("--search-concurrency", type=_within(1, 4096), default=256, metavar="M",
                        help="Searches in flight at most (the platform: 16-256; default 256)")
    parser.add_argument("--streaming", action="store_true",
                        help="the streaming mode: Adds in stages, every question after each stage")
    parser.add_argument("--stages", type=_positive, metavar="S",
                        help="with --streaming: parts each conversation's Adds are sent in (default 4)")
    parser.add_argument("--top-k", type=_within(1, 100), default=100, metavar="K",
                        help="top_k of every Search (default 100, the platform's)")
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="the shuffle of each conversation's Adds (default 0)")
    parser.add_argument("--in-order", action="store_true",
                        help="each conversation's Adds one at a time, in file order (the reference)")
    parser.add_argument("--limit-users", type=_positive, metavar="N",
                        help="only the first N conversations")
    parser.add_argument("--timeout", type=_seconds, default=1800.0, metavar="SECONDS",
                        help="per-request timeout (default 1800, the platform's 30 minutes)")
    parser.add_argument("--prompts", type=_within(0, 10_000), default=3, metavar="N",
                        help="reader's prompts written to prompts/ (default 3)")
    parser.add_argument("--out", default="rehearsal", metavar="DIR",
                        help="where the report goes (default ./rehearsal; prompts/ in it is rewritten)")
    parser.add_argument("--quiet", action="store_true", help="no progress on a terminal")
    parser.add_argument("--compare", nargs=2, metavar=("DIR_A", "DIR_B"),
                        help="instead of a run: how many questions two rehearsals answered "
                        "differently (exit 0 when none, 1 otherwise)")
    parser.set_defaults(refuse=parser.error)


def build_parser(prog: str = MODULE_PROG) -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="Evidence-first memory retriever for LLM agents.",
                    epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"aml_retriever {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for name, summary, example in (
            ("serve", "serve the HTTP API until SIGTERM, SIGINT or SIGHUP",
             "python3 -m aml_retriever serve --port 8080 --db ./aml.db --api-key KEY"),
            ("print-config", "print every effective setting and where it came from",
             "AML_PORT=9000 python3 -m aml_retriever print-config --config my.json")):
        command = _command(commands, name, summary, summary[0].upper() + summary[1:] + ".", example)
        command.usage = "%(prog)s [--config FILE] [SETTING ...] (each setting's flag, by group below)"
        command.add_argument("--config", help="JSON file of settings (see config.example.json)")
        by_name = {setting.name: setting for setting in SETTINGS}
        for title, names in SETTING_GROUPS:
            group = command.add_argument_group(title)
            for setting_name in names:
                _add_setting(group, by_name[setting_name])

    delete = _command(commands, "delete-user", "remove every record of one user",
                      "Remove one user's messages, views, index rows, request records and session "
                      "cursors in one transaction. Safe beside a running server. The store must "
                      "exist.",
                      "python3 -m aml_retriever delete-user --db ./aml.db --user user-1")
    _store_options(delete)
    delete.add_argument("--user", required=True, help="the user_id, exactly as it was sent")

    purge = _command(commands, "purge", "remove every user's data",
                     "Remove every user's file. Refused while a server uses the store.",
                     "python3 -m aml_retriever purge --db ./aml.db --yes")
    _store_options(purge)
    purge.add_argument("--yes", action="store_true", help="confirm; nothing is removed without it")

    stats = _command(commands, "stats", "print counts (never content) as JSON",
                     "Print user, message, session and request counts and the store's size.",
                     "python3 -m aml_retriever stats --db ./aml.db")
    _store_options(stats)

    reindex = _command(commands, "reindex", "rebuild derived rows from the original messages",
                       "Rebuild every user's features, index rows, conversation links and segments "
                       "from the stored original messages, for the index settings given "
                       "(segment_*). Refused while a server uses the store. Progress on stderr.",
                       "python3 -m aml_retriever reindex --db ./aml.db --config my.json")
    _store_options(reindex)
    for setting in SETTINGS:
        if setting.changes_index:  # the flags `serve` says a changed index needs
            _add_setting(reindex, setting)
    reindex.add_argument("--quiet", action="store_true", help="no progress on a terminal")

    mcp = _command(commands, "mcp", "serve the memory tools to an agent over MCP on stdio",
                   "Serve remember, update, recall, forget, recent, history and handoff to an MCP "
                   "client on stdin and stdout (logs on stderr) until end of input, SIGTERM or "
                   "SIGINT. Local memory lives in PROJECT_ROOT/.aml/memory.db; global memory in "
                   "GLOBAL_ROOT/memory.db. Takes the settings serve takes (ranking, durability, "
                   "log level, proposed_statements); see docs/MCP.md.",
                   "python3 -m aml_retriever mcp --project-root /path/to/project --config my.json")
    _memory_roots(mcp)
    mcp.add_argument("--config", help="JSON file of settings (see config.example.json)")
    for setting in SETTINGS:
        if setting.name in MCP_SETTINGS:
            _add_setting(mcp, setting)

    register = _command(commands, "mcp-register", "register the MCP server in a project's .mcp.json",
                        "Add the memory server to PROJECT_ROOT/.mcp.json (the project's MCP servers, "
                        "as Claude Code reads them; other servers are kept), started by this very "
                        "interpreter by its absolute path, with PYTHONPATH naming this checkout when "
                        "the package is not installed: it starts from any shell. Prints the entry, "
                        "which other clients' configurations take as it is.",
                        "python3 -m aml_retriever mcp-register --project-root /path/to/project")
    register.add_argument("--project-root", default=".",
                          help="the project (default: the current directory)")
    register.add_argument("--name", default="memory", help="the server's name (default memory)")

    review = _command(commands, "review", "list, confirm or reject statements awaiting review",
                      "A person's review of what agents inferred: without --confirm or --reject, "
                      "list the proposed statements; --confirm makes one part of default recall, "
                      "--reject forgets it and leaves a tombstone (its text hash). Every change is "
                      "audited with actor cli.",
                      "python3 -m aml_retriever review --db ./.aml/memory.db --confirm local:12")
    _read_store_options(review)
    review.add_argument("--confirm", action="append", default=[], metavar="ID",
                        help="confirm this statement (local:12 in an agent memory, m12 in an HTTP "
                        "store, or 12); repeatable")
    review.add_argument("--reject", action="append", default=[], metavar="ID",
                        help="reject this statement; repeatable")

    audit_log = _command(commands, "audit", "print a user's audit log (never content) as JSON",
                         "Print one page of a user's append-only audit log, newest first as the "
                         "inspector shows it (--order oldest: as written, as HTTP pages it by "
                         "default): time, action, actor, message ids (an agent memory's as its "
                         "statements, local:12), request id, keyed content hash.",
                         "python3 -m aml_retriever audit --db ./aml.db --user user-1 --limit 50")
    _read_store_options(audit_log)
    audit_log.add_argument("--cursor", type=int, default=0,
                           help="next_cursor of the previous page (default: from the start)")
    audit_log.add_argument("--limit", type=int, default=100, help="events at most (1 to 1000)")
    audit_log.add_argument("--order", choices=("newest", "oldest"), default="newest",
                           help="newest first (default) or oldest first")

    history = _command(commands, "history", "print every version of a statement and its events",
                       "Print the versions of one statement (what it replaced, what replaced it), "
                       "oldest first, and every audit event about them.",
                       "python3 -m aml_retriever history --db ./.aml/memory.db local:12")
    _read_store_options(history)
    history.add_argument("id", help="the statement or message id (local:12 in an agent memory, "
                         "m12 in an HTTP store, or 12)")

    export = _command(commands, "export", "write a user's memory as NDJSON, or a memory as Markdown",
                      "With --db: write one user's messages as the Add bodies that rebuild them, "
                      "one JSON object a line (NDJSON), in the order the store took them, with their "
                      "original request ids, sessions, roles, timestamps and lifecycle (`import` "
                      "reads it back; see docs/API_CONTRACT.md). With --markdown: write one scope "
                      "of an agent's memory as Markdown (MEMORY.md): its current statements, "
                      "newest first, one a line with id, kind and time, the handoff first; never "
                      "read back as memory.",
                      "python3 -m aml_retriever export --db ./aml.db --user user-1 --out user-1.ndjson\n"
                      "  python3 -m aml_retriever export --markdown --project-root . --out MEMORY.md")
    form = export.add_mutually_exclusive_group(required=True)
    form.add_argument("--db", help="NDJSON of one user of this store (an HTTP store's catalog, or "
                                   "an agent memory DIR/.aml/memory.db)")
    form.add_argument("--markdown", action="store_true",
                      help="Markdown of an agent memory (needs --project-root)")
    export.add_argument("--user", default=MEMORY_USER,
                        help=f"with --db: the user_id (default {MEMORY_USER}: an agent memory's one user)")
    export.add_argument("--project-root", help="with --markdown: the project whose local memory this is")
    export.add_argument("--global-root",
                        help="with --markdown: where the account's global memory lives (default: the "
                             f"platform's user data directory, here {default_global_root()})")
    export.add_argument("--scope", choices=("local", "global"), default="local",
                        help="with --markdown: which memory (default local)")
    export.add_argument("--out", help="write to this file (default: standard output); written whole "
                                      "or not at all")

    import_ = _command(commands, "import", "read a user's memory back from an NDJSON export",
                       "Store every line of an export (one Add body a line) under its user, each "
                       "line in one transaction, audited as `import` with actor cli. Idempotent: a "
                       "request id the user has already, with the same payload, is a replay and "
                       "changes nothing, so an import can be run again. Every line is checked "
                       "before any is stored; a line that cannot be stored stops the import with an "
                       "error naming it (the lines before it stay imported). Makes the store when "
                       "it does not exist. Safe beside a running server.",
                       "python3 -m aml_retriever import --db ./aml.db --in user-1.ndjson")
    _store_options(import_)
    import_.add_argument("--in", dest="in_file", required=True, metavar="FILE",
                         help="the NDJSON file (as export writes it)")
    import_.add_argument("--max-line-bytes", type=_positive, default=exchange.MAX_LINE_BYTES,
                         metavar="N", help="refuse a line longer than this many bytes "
                         f"(default {exchange.MAX_LINE_BYTES}, 16 MiB)")
    import_.add_argument("--quiet", action="store_true", help="no progress on a terminal")

    backup_ = _command(commands, "backup", "copy the whole store, consistently, while it serves",
                       "Copy the catalog and every user file into DIR (under the same names) through "
                       "SQLite's backup API: each file as one committed state, whatever a running "
                       "server writes meanwhile. Refuses a DIR that holds a store already.",
                       "python3 -m aml_retriever backup --db ./aml.db --to ./backups/2026-08-05")
    backup_.add_argument("--db", required=True, help="the store (its catalog, e.g. ./aml.db)")
    backup_.add_argument("--to", required=True, metavar="DIR", help="where the copy goes")
    backup_.add_argument("--quiet", action="store_true", help="no progress on a terminal")

    _rehearse_options(_command(
        commands, "rehearse", "drive a running server as the leaderboard does; report what would fail",
        "Rehearse a leaderboard run (memory interface memory-api-v1.1) against a running server, "
        "driving it as the platform's client does: every Add of the --data conversations (up to "
        "--add-concurrency at once; a conversation's Adds in parallel, in a shuffle by --seed), "
        "then every question once as a Search (up to --search-concurrency at once; top_k "
        "--top-k; the question's answer choices as options when the data has them). A 429 is "
        "honoured (Retry-After seconds, at most 60; 60 without one); an Add is retried the same "
        "way on 409 and 524; at most 32 attempts; nothing else is retried. With --streaming, each "
        "conversation's Adds go in --stages parts, every question asked after each part (the last "
        "part's answers are scored), conversations interleaved. Every answer is checked as the "
        "platform checks it. Writes into --out: report.json (requests by status, outcomes, "
        "retries, latency, the evidence figures per data set), answers.jsonl (a digest of each "
        "scored answer: --compare tells two rehearsals apart) and prompts/<qid>.txt (the "
        "reader's prompt for --prompts questions as the platform's template renders it: "
        "`Memories for user {name}:`, the items' contents one a line, a blank line, `Question: "
        "...`; {name} is the conversation's user_id). Exit 1 when the platform would fail "
        "anything: a failed request, a malformed answer, no server.",
        "python3 -m aml_retriever rehearse --url http://127.0.0.1:8080 --data eval_out/replay/ "
        "--add-concurrency 16 --search-concurrency 16\n"
        "  python3 -m aml_retriever rehearse --compare rehearsal-seed0 rehearsal-seed1"))

    check = _command(commands, "check", "check this machine, and a store when --db is given",
                     "Check Python, SQLite and FTS5; with --db, also the store: the catalog and "
                     "every user file (SQLite quick_check, read only), damaged files set aside, "
                     "free space on its disk and the open-file limit. Exits 1 with one line per "
                     "problem.", "python3 -m aml_retriever check --db ./aml.db")
    check.add_argument("--db", help="a store to check as well (never created or changed)")
    for command in commands.choices.values():  # examples written as `python3 -m ...` name this prog
        command.epilog = (command.epilog or "").replace(MODULE_PROG, prog)
    return parser


def console() -> int:
    """The `aml-retriever` console script: the same commands, its own name in help and usage."""
    return main(prog=CONSOLE_PROG)


def main(argv: Sequence[str] | None = None, prog: str = MODULE_PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:
        # The reader went away (`stats | head -3`): nothing is left to say to it, and the
        # interpreter's last flush must not fail again on the way out.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except AmlError as exc:
        return _failed(exc.message)
    except OSError as exc:  # a port, a file or a permission: the system's own reason, one line
        where = f" ({exc.filename})" if exc.filename else ""
        return _failed(f"{exc.strerror or exc}{where}")
    except sqlite3.Error as exc:
        return _failed(f"the store cannot be used: {exc}")


def _failed(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def _settings(args: argparse.Namespace) -> Config:
    return load({s.name: getattr(args, s.name, None) for s in SETTINGS}, args.config)


def _serve(args: argparse.Namespace) -> int:
    from aml_retriever.app import App
    from aml_retriever.processes import serve_processes, usable_cores

    config = _settings(args)
    _require_folder(config.db_path)
    logs.configure(config.log_level, config.log_format)
    if config.processes == 0:
        config = config.with_values(processes=min(64, usable_cores()))
    try:
        if config.processes > 1:
            return serve_processes(config)
        app = App(config)
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            raise AmlError(f"cannot listen on {config.host}:{config.port}: {exc.strerror}",
                           "port") from None
        raise
    app.run_forever()
    return 0


def _print_config(args: argparse.Namespace) -> int:
    config = _settings(args)
    shown = config.redacted()
    _print({s.name: {"value": shown[s.name], "from": config.sources[s.name]} for s in SETTINGS})
    return 0


def _store(args: argparse.Namespace, reindexing: bool = True,
           read_only: bool = False) -> tuple[Store, Config]:
    """The existing store a whole-store command works on (never created here: a mistyped --db
    is an error, not an empty store). Only `reindex` needs the index settings; the others work
    on any store whatever settings built it. `read_only`: a command that only reads opens it
    so, and works where the user may not write."""
    given = {s.name: getattr(args, s.name, None) for s in SETTINGS if s.changes_index}
    config = load({"db_path": args.db, **given}, args.config)
    _require_store(config.db_path)
    return Store(config.db_path, retrieval=config.retrieval(),
                 reindexing=reindexing, read_only=read_only), config


def _delete_user(args: argparse.Namespace) -> int:
    parse_user({"user_id": args.user})  # refused as HTTP refuses it, before the store is opened
    store, _ = _store(args)
    try:
        _print(MemoryService(store).delete_user(args.user, actor="cli"))
    finally:
        store.close()
    return 0


def _purge(args: argparse.Namespace) -> int:
    if not args.yes:
        print("error: purge removes every user's data; pass --yes to confirm", file=sys.stderr)
        return 2
    store, _ = _store(args)
    _print({"success": True, "user_files_removed": store.purge()})
    return 0


def _stats(args: argparse.Namespace) -> int:
    store, _ = _store(args, read_only=True)
    try:
        counted = MemoryService(store).stats()
    finally:
        store.close()
    _print(counted)
    if counted["unreadable_user_files"]:  # counts that leave users out: said, and exit 1
        return _failed(f"{counted['unreadable_user_files']} user file(s) could not be read here, "
                       "nor copied to read them, and are not counted (copy the store somewhere "
                       "writable, or read it where it was written)")
    return 0


def _reindex(args: argparse.Namespace) -> int:
    store, config = _store(args)
    try:
        # A reindex rewrites every user's derived rows; the server's Searches stay right
        # meanwhile without it, so nothing need be done in its place.
        with store.exclusive("a running server answers as before; reindex once it is stopped"):
            shown = Progress("reindex", "users", len(store.shard_paths()), args.quiet)
            done = MemoryService(store, retrieval=config.retrieval()).reindex(
                lambda done, _: shown.step(done))
            shown.finish()
            _print({"success": True, "reindexed": done})
    finally:
        store.close()
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from aml_retriever.agents.mcp_server import serve_stdio

    config = _settings(args)
    logs.configure(config.log_level, config.log_format)
    memory = _memory(args, config)
    logging.getLogger("aml_retriever.mcp").info(
        "serving MCP on stdio: local memory %s, global memory %s", memory.stores["local"],
        memory.stores["global"])
    serve_stdio(memory, roots_from_client=args.project_root is None)
    return 0


def _memory(args: argparse.Namespace, config: Config | None = None) -> ScopedMemory:
    """The agent memory of --project-root and --global-root, with the settings given."""
    config = config or load()
    project_root = Path(args.project_root or ".").expanduser()
    if not project_root.is_dir():
        raise InvalidField(f"--project-root {project_root} is not a directory", "project_root")
    global_root = Path(args.global_root).expanduser().resolve() if args.global_root else None
    return ScopedMemory.at(project_root.resolve(), global_root,
                           retrieval=memory_retrieval(config.retrieval(),
                                                      parse_weights(config.signal_weights)),
                           proposed=config.proposed_statements, synchronous=config.synchronous)


def _require_folder(path: str) -> None:
    """Refuse to serve a store in a folder that does not exist: the store file is made where
    there is none (a first run), its folder never (a mistyped --db would serve an empty store:
    every Search empty, as sqlite-utils and datasette refuse too)."""
    folder = Path(os.path.abspath(path)).parent
    if not folder.is_dir():
        raise InvalidField(f"--db {path}: the folder {folder} does not exist (check --db, or make "
                           f"the folder first: mkdir -p '{folder}')", "db")


def _require_store(path: str) -> None:
    """Refuse a store that does not exist: commands that read or delete never create one."""
    if not Path(path).is_file():
        raise InvalidField(f"--db {path}: there is no store at {path} (check --db)", "db")


@contextmanager
def _service(args: argparse.Namespace, read_only: bool = False) -> Iterator[MemoryService]:
    """The existing store --db names (any index settings: nothing is searched), closed after;
    `read_only` for a command that only reads."""
    _require_store(args.db)
    store = Store(args.db, reindexing=True, read_only=read_only)
    try:
        yield MemoryService(store)
    finally:
        store.close()


def _review(args: argparse.Namespace) -> int:
    scope = _memory_scope(args)
    with _service(args) as service:
        statements = _cli_statements(service, args, scope)
        if not args.confirm and not args.reject:
            _print({"proposed": _shown(scope, statements.proposed(audit.MAX_PAGE))})
            return 0
        changed = {"confirmed": _shown(scope, [statements.confirm(message_number(i, scope)).statement
                                               for i in args.confirm]),
                   "rejected": _shown(scope, [statements.reject(message_number(i, scope)).statement
                                              for i in args.reject])}
        service.store.checkpoint_dirty()
    _print(changed)
    return 0


def _memory_scope(args: argparse.Namespace) -> str | None:
    """The scope of the agent memory --db names (PROJECT/.aml/memory.db is a project's local
    memory, another memory.db the account's global one), so its statements are shown with the
    ids agents see (local:12); None for an HTTP store, whose messages are m12."""
    db = Path(args.db)
    if args.user != MEMORY_USER or db.name != STORE_NAME:
        return None
    return "local" if db.parent.name == ".aml" else "global"


def _cli_statements(service: MemoryService, args: argparse.Namespace,
                    scope: str | None) -> Statements:
    shown = (lambda m: statement_id(scope, m)) if scope else str
    return Statements(service, args.user, "cli", shown)


def _shown(scope: str | None, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored messages as this store's reader knows them: an agent's statements, or messages."""
    return [statement_of(scope, row) for row in rows] if scope else rows


def _audit(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= audit.MAX_PAGE or args.cursor < 0:
        raise InvalidField(f"--limit must be from 1 to {audit.MAX_PAGE} and --cursor at least 0",
                           "limit")
    scope = _memory_scope(args)
    with _service(args) as service:
        if not service.holds(args.user):
            return _unknown_user(args)
        page = service.audit(args.user, args.cursor, args.limit, newest=args.order == "newest")
    if scope:
        page["events"] = [event_of(scope, event) for event in page["events"]]
    _print(page)
    return 0


def _unknown_user(args: argparse.Namespace) -> int:
    """A read of a user the store does not hold (never added, or deleted) says so, where an
    empty answer would pass a misspelt id for an empty memory (HTTP: 404 unknown_user)."""
    which = ("given with --user" if args.user != MEMORY_USER
             else f"{MEMORY_USER}, the default (an agent memory's one user): name one with --user")
    print(f"error: {args.db} holds no user by the id {which}", file=sys.stderr)
    return 1


def _mcp_register(args: argparse.Namespace) -> int:
    project = Path(args.project_root)
    if not project.is_dir():
        raise InvalidField(f"--project-root {args.project_root}: no such directory", "project_root")
    _print(registration.register(project.resolve(), args.name))
    return 0


def _history(args: argparse.Namespace) -> int:
    scope = _memory_scope(args)
    with _service(args) as service:
        found = _cli_statements(service, args, scope).history(message_number(args.id, scope))
    if scope:
        found = {"versions": _shown(scope, found["versions"]),
                 "events": [event_of(scope, event) for event in found["events"]]}
    _print(found)
    return 0


def _export(args: argparse.Namespace) -> int:
    if args.markdown:
        if not args.project_root:
            print("error: export --markdown needs --project-root", file=sys.stderr)
            return 2
        memory = _memory(args)
        try:
            text = memory.markdown(args.scope)
        finally:
            memory.close()
        with _output(args.out) as out:
            out.write(text.encode("utf-8"))
        return 0
    parse_user({"user_id": args.user})
    with _service(args, read_only=True) as service:
        if not service.holds(args.user):  # nothing written, not even an empty file
            return _unknown_user(args)
        with _output(args.out) as out, closing(exchange.export(service.store, args.user)) as lines:
            written = 0
            for line in lines:
                out.write(exchange.ndjson(line))
                written += 1
    if written == 0:
        print("warning: this user holds no messages: the export is empty", file=sys.stderr)
    return 0


@contextmanager
def _output(path: str | None) -> Iterator[Any]:
    """Standard output, or a file written whole or not at all (a temporary file beside it is
    renamed over it once everything is written)."""
    if path is None:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    target = Path(path)
    if not target.parent.is_dir():  # named as the user wrote it, not as the temporary file beside it
        raise FileNotFoundError(errno.ENOENT, "no such directory for --out", str(target.parent))
    partial = target.with_name(f".{target.name}.partial")
    try:
        with partial.open("wb") as out:
            yield out
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def _import(args: argparse.Namespace) -> int:
    given = {s.name: getattr(args, s.name, None) for s in SETTINGS if s.changes_index}
    config = load({"db_path": args.db, **given}, args.config)
    path = Path(args.in_file)
    with path.open("rb") as checked:  # every line checked before any is stored
        total = sum(1 for _ in exchange.read_lines(exchange.bounded_lines(checked,
                                                                          args.max_line_bytes)))
    store = Store(config.db_path, retrieval=config.retrieval())
    shown = Progress("import", "lines", total, args.quiet)
    try:
        importer = exchange.Importer(MemoryService(store, retrieval=config.retrieval()))
        with path.open("rb") as lines:
            for done, line in enumerate(exchange.read_lines(
                    exchange.bounded_lines(lines, args.max_line_bytes)), 1):
                importer.add(line)
                shown.step(done)
        store.checkpoint_dirty()
    finally:
        shown.finish()
        store.close()
    _print({"success": True, **importer.counts})
    return 0


def _backup(args: argparse.Namespace) -> int:
    _require_store(args.db)
    shown = Progress("backup", "user files", 0, args.quiet)
    try:
        result = backup(Path(args.db).absolute(), Path(args.to), shown)
    finally:
        shown.finish()
    _print(result)
    return 0


def _rehearse(args: argparse.Namespace) -> int:
    from aml_retriever.evaluation import rehearsal, rehearsal_report

    if args.compare:
        try:
            differ, total = rehearsal_report.compare(Path(args.compare[0]), Path(args.compare[1]))
        except ValueError as exc:
            return _failed(str(exc))
        print(f"{len(differ)} of {total} questions answered differently")
        for line in differ[:20]:
            print(f"  {line}")
        return 1 if differ else 0
    if not args.url or not args.data:
        args.refuse("--url and --data are required (or --compare DIR_A DIR_B)")
    if args.stages is not None and not args.streaming:
        args.refuse("--stages applies to --streaming only")
    settings = rehearsal.Settings(
        url=args.url, data=tuple(args.data),
        api_key=args.api_key if args.api_key is not None else os.environ.get("AML_API_KEY") or None,
        add_concurrency=args.add_concurrency, search_concurrency=args.search_concurrency,
        streaming=args.streaming, stages=args.stages or rehearsal.Settings.stages, top_k=args.top_k,
        seed=args.seed, in_order=args.in_order, limit_users=args.limit_users, timeout=args.timeout,
        prompts=args.prompts, out=args.out, quiet=args.quiet)
    try:
        done = rehearsal.rehearse(settings, lambda total: Progress("rehearse", "requests", total,
                                                                   args.quiet))
    except rehearsal.DataError as exc:
        return _failed(str(exc))
    except KeyboardInterrupt:
        return _failed("interrupted")
    if done.aborted:
        return _failed(f"{done.aborted}; report in {done.path}")
    print(rehearsal_report.summary(done.report, done.path))
    return 0 if done.report["failed"] == 0 else 1


def message_number(text: str, scope: str | None = None) -> int:
    """A message id as a person types it: m12 or 12, or, in an agent memory, the id agents see
    (local:12 in a project's memory, global:12 in the account's)."""
    match = re.fullmatch(r"(?:m|(local|global):)?([1-9][0-9]{0,17})", text.strip())
    example = f"{scope}:12 or 12" if scope else "m12 or 12"
    if match is None:
        raise InvalidField(f"{text[:40]!r} is not a statement id ({example})", "id")
    if match.group(1) and match.group(1) != scope:
        where = f"this is the {scope} memory" if scope else "this is not an agent's memory"
        raise InvalidField(f"{text.strip()} names the {match.group(1)} memory, but {where} "
                           f"(ids here look like {example})", "id")
    return int(match.group(2))


def _check(args: argparse.Namespace) -> int:
    checks = [
        (f"Python {sys.version.split()[0]} (need >= {'.'.join(map(str, MIN_PYTHON))})",
         sys.version_info >= MIN_PYTHON),
        (f"SQLite {sqlite3.sqlite_version}", True),
        ("FTS5 with the unicode61 categories option", _fts5_works()),
    ]
    if args.db is not None:
        checks += store_checks(Path(args.db))
    for label, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {label}")
    return 0 if all(ok for _, ok in checks) else 1


def store_checks(db: Path) -> list[tuple[str, bool]]:
    """What `check --db` reports of a store, read only: one (line, ok) per finding."""
    from aml_retriever.app import LOW_SPACE_BYTES

    if db.is_dir():
        return [(f"{db} is a directory, not a store file", False)]
    if not db.is_file():
        return [(f"no store at {db}: no such file (serve, or an import, makes one there)", False)]
    checks = [(f"catalog {db}", _quick_check(db) == "ok")]
    shard_dir = Path(f"{db}.users")
    files = sorted(shard_dir.glob("??/*.db"))
    damaged = [path.name for path in files if _quick_check(path) != "ok"]
    checks.append((f"{len(files)} user files, {len(damaged)} damaged"
                   + (f": {', '.join(damaged)}" if damaged else ""), not damaged))
    quarantined = sorted(p.name for p in (shard_dir / QUARANTINE).glob("*.db"))
    checks.append((f"{len(quarantined)} damaged user files set aside in {shard_dir / QUARANTINE}"
                   + (f": {', '.join(quarantined)}" if quarantined else ""), not quarantined))
    free = shutil.disk_usage(db.parent).free
    checks.append((f"{free // 2**20:,} MiB free on the store's disk (writes need "
                   f"{LOW_SPACE_BYTES // 2**20} MiB)", free >= LOW_SPACE_BYTES))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    checks.append((f"open-file limit {soft} (a server needs {MIN_OPEN_FILES})",
                   soft == resource.RLIM_INFINITY or soft >= MIN_OPEN_FILES))
    return checks


def _quick_check(path: Path) -> str:
    try:
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
        try:
            return str(conn.execute("PRAGMA quick_check").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return str(exc)


def _fts5_works() -> bool:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(words, tokenize=\"{FTS_TOKENIZE}\")")
        conn.execute("INSERT INTO t (words) VALUES ('北京 zurich')")
        return conn.execute("SELECT count(*) FROM t WHERE t MATCH '\"zurich\"'").fetchone()[0] == 1
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def _print(payload: dict[str, Any]) -> None:
    print(json.dumps(payload, ensure_ascii=False, indent=2))


COMMANDS = {"serve": _serve, "print-config": _print_config, "delete-user": _delete_user,
            "purge": _purge, "stats": _stats, "reindex": _reindex, "mcp": _mcp, "check": _check,
            "mcp-register": _mcp_register,
            "review": _review, "audit": _audit, "history": _history, "export": _export,
            "import": _import, "backup": _backup, "rehearse": _rehearse}
