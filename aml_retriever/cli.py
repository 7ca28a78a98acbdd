"""The command line: `python3 -m aml_retriever <command>`. Parses, calls, prints.

Exit codes: 0 success; 1 the command could not do its work (the reason on stderr: a refused
setting, a store in use or written by another version); 2 a usage error (unknown command or flag,
a missing confirmation).
"""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aml_retriever import __version__
from aml_retriever.errors import AmlError
from aml_retriever.scopes import ScopedMemory, default_global_root
from aml_retriever.service import MemoryService
from aml_retriever.settings import SETTINGS, Config, Setting, load
from aml_retriever.store import Store
from aml_retriever.tokenizer import FTS_TOKENIZE

MIN_PYTHON = (3, 11)
EXIT_CODES = "exit codes: 0 success, 1 could not do its work (reason on stderr), 2 usage error"


def _add_setting(parser: argparse.ArgumentParser, setting: Setting) -> None:
    default = "none" if setting.secret else repr(setting.default)
    help_text = f"{setting.help} (env {setting.env}; default {default})"
    if setting.changes_index:
        help_text += "; changing it needs `reindex`"
    if setting.kind is bool:
        parser.add_argument(setting.flag, dest=setting.name, action=argparse.BooleanOptionalAction,
                            default=None, help=help_text)
    else:
        parser.add_argument(setting.flag, dest=setting.name, type=setting.kind, default=None,
                            metavar=setting.name.upper(), help=help_text)


def _command(commands: Any, name: str, summary: str, description: str,
             example: str) -> argparse.ArgumentParser:
    return commands.add_parser(name, help=summary, description=description,
                               epilog=f"example:\n  {example}\n\n{EXIT_CODES}",
                               formatter_class=argparse.RawDescriptionHelpFormatter)


def _store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="store path (env AML_DB_PATH; default ./aml.db)")
    parser.add_argument("--config", help="JSON file of settings (see config.example.json)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m aml_retriever",
                                     description="Evidence-first memory retriever for LLM agents.",
                                     epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"aml_retriever {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for name, summary, example in (
            ("serve", "serve the HTTP API until SIGTERM or SIGINT",
             "python3 -m aml_retriever serve --port 8080 --db ./aml.db --api-key KEY"),
            ("print-config", "print every effective setting and where it came from",
             "AML_PORT=9000 python3 -m aml_retriever print-config --config my.json")):
        command = _command(commands, name, summary, summary[0].upper() + summary[1:] + ".", example)
        command.add_argument("--config", help="JSON file of settings (see config.example.json)")
        for setting in SETTINGS:
            _add_setting(command, setting)

    delete = _command(commands, "delete-user", "remove every record of one user",
                      "Remove one user's messages, views, index rows, request records and session "
                      "cursors in one transaction. Safe beside a running server.",
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
    reindex.add_argument("--quiet", action="store_true", help="no progress on stderr")

    mcp = _command(commands, "mcp", "serve the memory tools to an agent over MCP on stdio",
                   "Serve remember, recall, forget and recent to an MCP client on stdin and "
                   "stdout (logs on stderr) until end of input, SIGTERM or SIGINT. Local memory "
                   "lives in PROJECT_ROOT/.aml/memory.db; global memory in GLOBAL_ROOT/memory.db. "
                   "See docs/MCP.md.",
                   "python3 -m aml_retriever mcp --project-root /path/to/project")
    mcp.add_argument("--project-root", required=True,
                     help="the project whose local memory this is (DIR/.aml/memory.db)")
    mcp.add_argument("--global-root",
                     help="where the account's global memory lives (default: the platform's user "
                          f"data directory, here {default_global_root()})")
    mcp.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                     help="log level on stderr (content is never logged; default INFO)")

    _command(commands, "check", "check Python, SQLite and FTS5 on this machine",
             "Environment self-check; exits 1 when something is missing.",
             "python3 -m aml_retriever check")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except AmlError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1


def _settings(args: argparse.Namespace) -> Config:
    return load({s.name: getattr(args, s.name, None) for s in SETTINGS}, args.config)


def _serve(args: argparse.Namespace) -> int:
    from aml_retriever.app import App

    config = _settings(args)
    logging.basicConfig(level=config.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    App(config).run_forever()
    return 0


def _print_config(args: argparse.Namespace) -> int:
    config = _settings(args)
    shown = config.redacted()
    _print({s.name: {"value": shown[s.name], "from": config.sources[s.name]} for s in SETTINGS})
    return 0


def _store(args: argparse.Namespace, reindexing: bool = True) -> tuple[Store, Config]:
    """A store for a whole-store command. Only `reindex` needs the index settings; the others
    work on any store whatever settings built it."""
    config = load({"db_path": args.db}, args.config)
    return Store(config.db_path, retrieval=config.retrieval(),
                 reindexing=reindexing), config


def _delete_user(args: argparse.Namespace) -> int:
    store, _ = _store(args)
    try:
        _print(MemoryService(store).delete_user(args.user))
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
    store, _ = _store(args)
    try:
        _print(MemoryService(store).stats())
    finally:
        store.close()
    return 0


def _reindex(args: argparse.Namespace) -> int:
    store, config = _store(args)
    progress = None if args.quiet else (
        lambda done, total: print(f"reindexed {done}/{total} users", file=sys.stderr))
    try:
        with store.exclusive():
            done = MemoryService(store, retrieval=config.retrieval()).reindex(progress)
            _print({"success": True, "reindexed": done})
    finally:
        store.close()
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from aml_retriever.mcp_server import serve_stdio

    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    project_root = Path(args.project_root).expanduser()
    if not project_root.is_dir():
        print(f"error: --project-root {project_root} is not a directory", file=sys.stderr)
        return 1
    global_root = Path(args.global_root).expanduser().resolve() if args.global_root else None
    memory = ScopedMemory.at(project_root.resolve(), global_root)
    logging.getLogger("aml_retriever.mcp").info(
        "serving MCP on stdio: local memory %s, global memory %s", memory.stores["local"],
        memory.stores["global"])
    serve_stdio(memory)
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


COMMANDS = {"serve": _serve, "print-config": _print_config, "delete-user": _delete_user,
            "purge": _purge, "stats": _stats, "reindex": _reindex, "mcp": _mcp, "check": _check}
