"""aml_retriever: a deterministic, evidence-first memory retriever for LLM agents.

The folders are the layers, lowest first; a layer imports only those below it:

    common/      errors and the table of ranking signals (imports nothing of the package)
    analysis/    text: index terms, stop words, dates, features
    storage/     SQLite: the catalog, one file per user, schema, audit, visibility, views
    engine/      a Search: question plan, candidate lists, signals, fusion, selection
    memory/      the service transports call: Add, Search, delete, statements, pages, export
    agents/      the two memories of an agent and the MCP server
    http/        the HTTP transport: connections, framing, routes, inspector, logs, metrics
    cluster/     user-sharded servers behind HAProxy
    evaluation/  suites, public data, metrics and the runner (over any of the above)

At the top, the entry points and the settings table: `cli` (every subcommand), `app` (assembles
a store, the service and the HTTP server, and stops them), `processes` (`serve --processes N`),
`settings` (every server setting, from defaults, a file, the environment and flags), `progress`
(the progress line of the command line's long work).
"""

import sys

# The package needs Python 3.11 (datetime.UTC, itertools.pairwise, ...): an older interpreter
# (macOS's own python3 is 3.9) gets one line naming the version needed at every entry point
# (`check`, `--version`, `serve`, `mcp`, the scripts), not an ImportError from deep inside.
# Written so that any Python can read it (no f-string: 3.5 and 2.7 cannot), hence the noqa.
if sys.version_info < (3, 11):  # noqa: UP036
    raise SystemExit("aml_retriever needs Python 3.11 or newer; this is Python {}.{}.{} ({})"  # noqa: UP032
                     .format(sys.version_info[0], sys.version_info[1], sys.version_info[2],
                             sys.executable))

# The one place the version is written: pyproject.toml reads it (dynamic version), and
# `--version`, GET /health, the MCP server's serverInfo and docs/changelog.md follow it.
__version__ = "0.7.0"
