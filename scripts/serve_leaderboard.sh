#!/usr/bin/env bash
# Serve for the leaderboard: the API as ./scripts/serve.sh serves it, with the answer window on at
# the size the leaderboard's reader reads (gpt-4o-mini answers from the first 117,760 tokens of a
# top_k 100 Search's results), and the reader's view on (that reader reads only the items' text:
# each message is shown with its day, time and speaker, and its relative dates written out).
# Every Search then answers the ranked evidence first and fills the rest of the window with the
# user's memory most likely to hold what the ranking missed (README, "Leaderboard submission").
# It serves with one process per core the machine lets it use (--processes 0): the platform sends
# up to 64 Adds and 256 Searches at once, and every one waits its turn and is answered, however
# long the queue (README, "Sizing").
# Flags pass through (--port 9000 --api-key KEY ...); a later --answer-window-tokens,
# --no-reader-view or --processes overrides these.
set -euo pipefail
exec "$(dirname "$0")/serve.sh" --answer-window-tokens 117760 --reader-view --processes 0 "$@"
