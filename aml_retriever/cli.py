"""The command line: `python3 -m aml_retriever <command>`. Parses, calls, prints; exit codes are
0 for success, 1 when the command could not do its work, 2 for a usage error."""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any

from aml_retriever import __version__
from aml_retriever.errors import AmlError
from aml_retriever.service import MemoryService
from aml_retriever.settings import SETTINGS, Setting, env_name, load
from aml_retriever.store import Store
from aml_retriever.tokenizer import FTS_TOKENIZE

MIN_PYTHON = (3, 11)


def _flag(setting: Setting) -> str:
    return "--db" if setting.name == "db_path" else setting.flag


def _add_setting(parser: argparse.ArgumentParser, setting: Setting) -> None:
    help_text = f"{setting.help} (env {env_name(setting)}; default {setting.default!r})"
    if setting.secret:
        help_text = f"{setting.help} (env {env_name(setting)}; default: none)"
    if setting.kind is bool:
        parser.add_argument(_flag(setting), dest=setting.name, action=argparse.BooleanOptionalAction,
                            default=None, help=help_text)
    else:
        parser.add_argument(_flag(setting), dest=setting.name, type=setting.kind, default=None,
                            metavar=setting.name.upper(), help=help_text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m aml_retriever",
                                     description="Evidence-first memory retriever for LLM agents.")
    parser.add_argument("--version", action="version", version=f"aml_retriever {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="serve the HTTP API",
                                description="Serve the Add/Search HTTP API until SIGTERM or SIGINT.")
    serve.add_argument("--config", help="JSON file of settings (see config.example.json)")
    for setting in SETTINGS:
        _add_setting(serve, setting)

    db_help = "store path (env AML_DB_PATH; default ./aml.db)"
    delete = commands.add_parser("delete-user", help="remove every record of one user",
                                 description="Remove one user's messages, index rows, request "
                                             "records and session cursors in one transaction.")
    delete.add_argument("--db", help=db_help)
    delete.add_argument("--user", required=True, help="the user_id, exactly as it was sent")

    purge = commands.add_parser("purge", help="remove every user's data",
                                description="Remove every user's file. Refused while a server "
                                            "uses the store.")
    purge.add_argument("--db", help=db_help)
    purge.add_argument("--yes", action="store_true", help="confirm; nothing is removed without it")

    stats = commands.add_parser("stats", help="print counts (never content) as JSON",
                                description="Print user, message, session and request counts.")
    stats.add_argument("--db", help=db_help)

    reindex = commands.add_parser("reindex", help="rebuild derived rows from the original messages",
                                  description="Rebuild every user's features, index rows, windows "
                                              "and segments from the stored original messages, for "
                                              "this version's index settings. Refused while a "
                                              "server uses the store.")
    reindex.add_argument("--db", help=db_help)

    commands.add_parser("check", help="check Python, SQLite and FTS5 on this machine",
                        description="Environment self-check; exits 1 when something is missing.")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except AmlError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1


def _serve(args: argparse.Namespace) -> int:
    from aml_retriever.app import App

    overrides = {s.name: getattr(args, s.name) for s in SETTINGS}
    config = load(overrides, args.config)
    logging.basicConfig(level=config.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    App(config).run_forever()
    return 0


def _store(args: argparse.Namespace) -> Store:
    return Store(load({"db_path": args.db}).db_path)


def _delete_user(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        _print(MemoryService(store).delete_user(args.user))
    finally:
        store.close()
    return 0


def _purge(args: argparse.Namespace) -> int:
    if not args.yes:
        print("error: purge removes every user's data; pass --yes to confirm", file=sys.stderr)
        return 2
    store = _store(args)
    removed = store.purge()
    _print({"success": True, "user_files_removed": removed})
    return 0


def _stats(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        _print(MemoryService(store).stats())
    finally:
        store.close()
    return 0


def _reindex(args: argparse.Namespace) -> int:
    store = Store(load({"db_path": args.db}).db_path, reindexing=True)
    try:
        with store.exclusive():
            _print({"success": True, "reindexed": MemoryService(store).reindex()})
    finally:
        store.close()
    return 0


def _check(_: argparse.Namespace) -> int:
    checks = [
        (f"Python {sys.version.split()[0]} (need >= {'.'.join(map(str, MIN_PYTHON))})",
         sys.version_info >= MIN_PYTHON),
        (f"SQLite {sqlite3.sqlite_version}", True),
        ("FTS5 with the unicode61 categories option", _fts5_works()),
    ]
    for label, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {label}")
    return 0 if all(ok for _, ok in checks) else 1


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


COMMANDS = {"serve": _serve, "delete-user": _delete_user, "purge": _purge, "stats": _stats,
            "reindex": _reindex, "check": _check}
