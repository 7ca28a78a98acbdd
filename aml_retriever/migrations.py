"""The schema: as it is now, and as the numbered migrations that led to it.

A store is a catalog file (the path the user names, e.g. `./aml.db`) plus one SQLite file per user
in the directory beside it (`./aml.db.users/`). Each file records how many migrations it has had
in `PRAGMA user_version` and what it is in its `meta` table; a file from a newer version, or one
that is not ours, is refused on open rather than silently mixed. A new file is made from the
current schema in one step (`SHARD_SCHEMA`, the same tables and indexes the migrations make, which
a test checks); an existing one runs the migrations it has not had. A change to the schema is a
new migration plus the same change to the current schema.
"""

from __future__ import annotations

from aml_retriever.tokenizer import FTS_TOKENIZE

STORE_FORMAT = "aml_retriever-store"
SHARD_FORMAT = "aml_retriever-user-shard"

# What a catalog holds: what this store is and which index settings built it; nothing of any user.
CATALOG_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

CATALOG_MIGRATIONS: tuple[str, ...] = (
    # 1: what this store is and which index settings built it; nothing of any user lives here.
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
)

# The messages table and its order index as they are now (SHARD_SCHEMA and migration 4 make them).
_MESSAGES_TABLE = """
-- Every original message, byte for byte. The id is the arrival order and is never reused
-- (AUTOINCREMENT), so a result id stays unique for the life of the store.
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    timestamp_assigned INTEGER NOT NULL,  -- 1 when the Add gave none and receive time was used
    segment_id INTEGER,                   -- the session segment (views.id) it belongs to
    features TEXT NOT NULL,               -- JSON of features.Features, extracted at Add time
    -- Its neighbours in its session's conversation order (timestamp, then arrival), NULL at the
    -- session's ends: a Search reads the windows around a hit along them (views.py).
    prev_id INTEGER,
    next_id INTEGER
);"""
# The conversation order of a session across Adds: (timestamp, arrival).
_MESSAGES_BY_SESSION = "CREATE INDEX messages_by_session ON messages (session_id, timestamp_ms, id);"

SHARD_SCHEMA = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

{_MESSAGES_TABLE}
{_MESSAGES_BY_SESSION}
-- The speakers a question may name ("What did Caroline say ..."), kept apart so a Search
-- reads a handful of names instead of scanning every message's.
CREATE TABLE speakers (speaker TEXT PRIMARY KEY) WITHOUT ROWID;

-- Idempotency: one row per accepted Add, written in the same transaction as its messages. They
-- took consecutive ids: first_message_id .. first_message_id + stored - 1 (a forgotten one
-- leaves a gap; a request whose messages are all forgotten is dropped).
CREATE TABLE requests (
    request_id TEXT PRIMARY KEY,
    payload_hash TEXT NOT NULL,
    session_id TEXT NOT NULL,
    stored INTEGER NOT NULL,
    timestamps_assigned INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    first_message_id INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- The per-session cursor: where each conversation stands, so segments can continue a session
-- across Add boundaries without scanning it.
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    message_count INTEGER NOT NULL,
    first_ms INTEGER NOT NULL,
    last_ms INTEGER NOT NULL,
    last_message_id INTEGER NOT NULL,
    open_segment_id INTEGER               -- the segment the next message may join
) WITHOUT ROWID;

-- Stored views over consecutive messages of one session, linked to their sources: 'segment', a
-- run of the session split at a silence or a size cap. Rebuilt from messages by `reindex`.
CREATE TABLE views (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    session_id TEXT NOT NULL,
    message_ids TEXT NOT NULL,            -- JSON list of messages.id in conversation order
    start_ms INTEGER NOT NULL,
    end_ms INTEGER NOT NULL
);

-- The full-text index of messages (rowid = messages.id). Contentless: the text is stored
-- once, in messages; the index holds only the derived terms (see tokenizer.py).
CREATE VIRTUAL TABLE message_index USING fts5(
    words, grams, content='', tokenize="{FTS_TOKENIZE}"
);

-- A record of every single statement removed by `forget` (MemoryService.forget): which message
-- went, when and why, so a removal can be accounted for. Never its content, nor anything derived
-- from it (its request id may be a hash of the content), so the record cannot confirm what was said.
CREATE TABLE removals (
    message_id INTEGER PRIMARY KEY,       -- the removed messages.id (ids are never reused)
    removed_ms INTEGER NOT NULL,
    reason TEXT NOT NULL                  -- what removed it, e.g. 'forget'
);
"""

SHARD_MIGRATIONS: tuple[str, ...] = (
    # 1: the original messages with their features, the idempotency records, the per-session
    # cursor, the derived views, and the full-text indexes (the comments of SHARD_SCHEMA say
    # what each is for now).
    f"""
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

    -- Every original message, byte for byte. The id is the arrival order and is never reused
    -- (AUTOINCREMENT), so a result id stays unique for the life of the store.
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        timestamp_ms INTEGER NOT NULL,
        timestamp_assigned INTEGER NOT NULL,  -- 1 when the Add gave none and receive time was used
        request_id TEXT NOT NULL,
        position INTEGER NOT NULL,            -- place within its Add
        segment_id INTEGER,                   -- the session segment (views.id) it belongs to
        features TEXT NOT NULL                -- JSON of features.Features, extracted at Add time
    );
    -- The conversation order of a session across Adds: (timestamp, arrival).
    CREATE INDEX messages_by_session ON messages (session_id, timestamp_ms, id);
    -- Finds the messages of one Add (crash checks, request-level inspection).
    CREATE INDEX messages_by_request ON messages (request_id, position);
    -- Rebuilds a segment's index row from its members when the segment grows.
    CREATE INDEX messages_by_segment ON messages (segment_id, timestamp_ms, id);
    -- The speakers a question may name ("What did Caroline say ..."), kept apart so a Search
    -- reads a handful of names instead of scanning every message's.
    CREATE TABLE speakers (speaker TEXT PRIMARY KEY) WITHOUT ROWID;

    -- Idempotency: one row per accepted Add, written in the same transaction as its messages.
    CREATE TABLE requests (
        request_id TEXT PRIMARY KEY,
        payload_hash TEXT NOT NULL,
        session_id TEXT NOT NULL,
        stored INTEGER NOT NULL,
        timestamps_assigned INTEGER NOT NULL,
        created_ms INTEGER NOT NULL
    ) WITHOUT ROWID;

    -- The per-session cursor: where each conversation stands, so derived views can continue a
    -- session across Add boundaries without scanning it.
    CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        message_count INTEGER NOT NULL,
        first_ms INTEGER NOT NULL,
        last_ms INTEGER NOT NULL,
        last_message_id INTEGER NOT NULL,
        open_segment_id INTEGER               -- the segment the next message may join
    ) WITHOUT ROWID;

    -- Derived views over consecutive messages of one session, linked to their sources:
    -- 'window' (a sliding window of a fixed size) and 'segment' (a run of the session split at a
    -- silence or a size cap). Rebuilt from messages by `reindex`.
    CREATE TABLE views (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        session_id TEXT NOT NULL,
        message_ids TEXT NOT NULL,            -- JSON list of messages.id in conversation order
        start_ms INTEGER NOT NULL,
        end_ms INTEGER NOT NULL
    );

    -- Which windows hold a message: a Search finds the windows around its message hits here.
    CREATE TABLE window_members (
        message_id INTEGER NOT NULL,
        view_id INTEGER NOT NULL,
        PRIMARY KEY (message_id, view_id)
    ) WITHOUT ROWID;

    -- The full-text index of messages (rowid = messages.id). Contentless: the text is stored
    -- once, in messages; the index holds only the derived terms (see tokenizer.py).
    CREATE VIRTUAL TABLE message_index USING fts5(
        words, grams, content='', tokenize="{FTS_TOKENIZE}"
    );
    """,
    # 2: a record of every single statement removed by `forget`.
    """
    CREATE TABLE removals (
        message_id INTEGER PRIMARY KEY,       -- the removed messages.id (ids are never reused)
        removed_ms INTEGER NOT NULL,
        reason TEXT NOT NULL                  -- what removed it, e.g. 'forget'
    );
    """,
    # 3: segments keep their members in views.message_ids and a message's segment is read by its
    # id, so no query reads messages by segment: the index cost 23 bytes a message for nothing.
    """
    DROP INDEX IF EXISTS messages_by_segment;
    """,
    # 4: windows are read from the conversation order at Search time (views.py), so their rows
    # and member links (~110 bytes a message) go; each message instead links to its neighbours in
    # its session's order (timestamp, arrival). An Add's messages take consecutive ids in one
    # transaction, so its request records the first id and finds them as a range: the request id
    # and place kept on every message, and their index (~60 bytes a message), go too. The
    # messages table is copied into its new shape (rather than altered column by column, which
    # older SQLite cannot do), keeping every id and the id sequence, so no id is ever reused.
    f"""
    DROP TABLE window_members;
    DELETE FROM views WHERE kind = 'window';
    ALTER TABLE requests ADD COLUMN first_message_id INTEGER NOT NULL DEFAULT 0;
    UPDATE requests SET first_message_id = coalesce((SELECT min(id - position) FROM messages
                                                     WHERE messages.request_id = requests.request_id), 0);
{_MESSAGES_TABLE.replace("CREATE TABLE messages (", "CREATE TABLE messages_v4 (")}
    INSERT INTO messages_v4 (id, session_id, role, content, timestamp_ms, timestamp_assigned,
                             segment_id, features, prev_id, next_id)
    SELECT id, session_id, role, content, timestamp_ms, timestamp_assigned, segment_id, features,
           lag(id) OVER conversation, lead(id) OVER conversation
    FROM messages WINDOW conversation AS (PARTITION BY session_id ORDER BY timestamp_ms, id);
    -- The old table's sequence is at least its largest id (the copy's may be less: a forgotten
    -- last message); it moves to the copy, and the rename takes it along.
    DELETE FROM sqlite_sequence WHERE name = 'messages_v4';
    UPDATE sqlite_sequence SET name = 'messages_v4' WHERE name = 'messages';
    DROP TABLE messages;
    ALTER TABLE messages_v4 RENAME TO messages;
    {_MESSAGES_BY_SESSION}
    """,
)
