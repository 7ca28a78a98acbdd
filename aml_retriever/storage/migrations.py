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

from aml_retriever.analysis.features import GENERIC_ROLES, Features
from aml_retriever.analysis.tokenizer import FTS_TOKENIZE

STORE_FORMAT = "aml_retriever-store"
SHARD_FORMAT = "aml_retriever-user-shard"

# What a catalog holds: what this store is and which index settings built it; nothing of any user.
# That a user was deleted, when and by which transport: nothing else (no user id, no hash of
# one, no counts), so the record identifies no one and recovers nothing (audit.py).
_DELETIONS = """
CREATE TABLE deletions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms INTEGER NOT NULL,
    actor TEXT NOT NULL
);
CREATE TRIGGER deletions_refuse_updates BEFORE UPDATE ON deletions
BEGIN SELECT RAISE(ABORT, 'the deletion record is append-only'); END;
CREATE TRIGGER deletions_refuse_deletes BEFORE DELETE ON deletions
BEGIN SELECT RAISE(ABORT, 'the deletion record is append-only'); END;
"""

CATALOG_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
""" + _DELETIONS

CATALOG_MIGRATIONS: tuple[str, ...] = (
    # 1: what this store is and which index settings built it; nothing of any user lives here.
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    # 2: the record that a user was deleted (time and transport only).
    _DELETIONS,
)

# Each message's features as JSON (features.Features), extracted at Add time, from migration 1
# to 13.
_FEATURES_COLUMN = "    features TEXT NOT NULL,\n"
# The messages table as migration 4 made it (migration 5 adds the lifecycle columns at its end).
_MESSAGES_V4 = """
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
""" + _FEATURES_COLUMN + """\
    -- Its neighbours in its session's conversation order (timestamp, then arrival), NULL at the
    -- session's ends: a Search reads the windows around a hit along them (views.py).
    prev_id INTEGER,
    next_id INTEGER
);"""
# The messages table as migration 14 made it: schema 4's without its features, with the columns
# migrations 5 to 12 added at its end. Migration 14 copies the table into this shape, so it stays
# as it is: a later migration that adds a column adds it to _MESSAGES_TABLE, not here.
_MESSAGES_V14 = _MESSAGES_V4.replace(_FEATURES_COLUMN, "").removesuffix(");") + """,
    -- The lifecycle (lifecycle.py). When the store took it: the record time `as_of` reads by.
    recorded_ms INTEGER NOT NULL DEFAULT 0,
    valid_ms INTEGER,                     -- when it became true, when not its timestamp
    retired_ms INTEGER,                   -- when an update replaced it (NULL: it is current)
    superseded_by INTEGER,                -- the message that replaced it
    origin TEXT NOT NULL DEFAULT 'user',  -- who said it: 'user' (a person) or 'agent' (inferred)
    trust TEXT NOT NULL DEFAULT 'confirmed',  -- 'proposed' until a person confirms it
    fingerprint BLOB,                     -- statements: keyed hash of the normalised text
    -- Migration 6: the reader's tokens of its content, estimated once at Add time
    -- (analysis/tokens.pieces: the margin is taken once for a whole answer), so an answer window
    -- is filled without reading the texts it leaves out. NULL in a file upgraded from before
    -- until `reindex`: estimated when read. Versions up to 0.7.0 stored each message's estimate
    -- with its margin: larger, so never less, until `reindex`.
    tokens INTEGER,
    -- Migration 7: what a Search's rankers read of its features, read with its row instead of
    -- parsed from them: whether it states an update or a date, as bits (features.MARK_*), and
    -- its names, numbers, dates and speaker as keys, each between newlines (features.keys_text).
    marks INTEGER NOT NULL DEFAULT 0,
    signal_keys TEXT NOT NULL DEFAULT '',
    -- Migration 9: the dates it gives relative to its day, as the reader's view writes them out
    -- (features.Features.told: JSON, '' when none). NULL in a file upgraded from before until
    -- `reindex`: read from the text when shown.
    told TEXT,
    -- Migration 12: its Add's place among its session's Adds (analysis/sequence.request_order:
    -- the last number of the request id), the order of messages said at the same instant in
    -- different Adds: a conversation's order is (timestamp_ms, said, id), never arrival alone.
    said INTEGER NOT NULL DEFAULT 0
);"""
# The messages table as it is now.
_MESSAGES_TABLE = _MESSAGES_V14
# The columns of _MESSAGES_V14, in order: what migration 14 copies.
MESSAGE_COLUMNS_V14 = ("id, session_id, role, content, timestamp_ms, timestamp_assigned, "
                       "segment_id, prev_id, next_id, recorded_ms, valid_ms, retired_ms, "
                       "superseded_by, origin, trust, fingerprint, tokens, marks, signal_keys, "
                       "told, said")
# The conversation order of a session across Adds: (timestamp, arrival), as migration 1 made it.
_MESSAGES_BY_SESSION = "CREATE INDEX messages_by_session ON messages (session_id, timestamp_ms, id);"
# Since migration 10 the same order carries what the answer window reads of each message (its
# outline: engine/window.py) and what a default read withholds by, so the fill reads the index
# alone: 4.0 -> 0.9 ms for a BEAM 500K user's 1,090 messages, ~15 bytes more a message.
_MESSAGES_BY_SESSION_OUTLINED_V10 = ("CREATE INDEX messages_by_session ON messages (session_id, "
                                     "timestamp_ms, id, role, tokens, marks, told, retired_ms, "
                                     "trust);")
# Since migration 12 the conversation's order is (timestamp, said, id): messages said at the same
# instant in different Adds go in their Adds' order (analysis/sequence.py), never by arrival.
_MESSAGES_BY_SESSION_OUTLINED = ("CREATE INDEX messages_by_session ON messages (session_id, "
                                 "timestamp_ms, said, id, role, tokens, marks, told, retired_ms, "
                                 "trust);")


# Each message's place in its conversation, apart from its text: a Search follows the links of
# its every hit (views.turns), and in the table each step read a row holding a whole message (450
# hits of BEAM dev messages, 1,850 characters: 1.6 ms by the table, 0.54 ms by this index).
_LINKS_INDEX = """
CREATE INDEX messages_links ON messages (id, prev_id, next_id, segment_id);
"""


# Who is who in the conversation (storage/speakers.py says what each table is for).
# The sessions in time order: the answer window walks them oldest first a page at a time
# (engine/window.py) instead of reading and sorting every session of the user.
_SESSIONS_BY_TIME = """
CREATE INDEX sessions_by_time ON sessions (first_ms, session_id);
"""

# The SQL functions the migrations derive a message's signal keys and its Add's place with
# (`signal_keys_of`, `request_order`, which Schema registers on every connection it migrates).
KEYS_FUNCTION = "aml_signal_keys"
ORDER_FUNCTION = "aml_request_order"


def signal_keys_of(features: str) -> str:
    """A message's signal keys as an Add stores them, from its stored features."""
    return Features.from_json(features).keys_text()


_SPEAKERS = """
-- Every name a message gives a role ('addressed': the side it speaks to; 'introduced': its own).
CREATE TABLE speaker_mentions (
    message_id INTEGER NOT NULL,
    name TEXT NOT NULL,                   -- normalised (tokenizer.normalize)
    role TEXT NOT NULL,                   -- the role the name is given to
    kind TEXT NOT NULL,
    PRIMARY KEY (message_id, name, role, kind)
) WITHOUT ROWID;
-- The evidence behind one name, oldest first (the inspector, explain).
CREATE INDEX speaker_mentions_by_name ON speaker_mentions (name, message_id);
-- How often each name is given to each role: a Search attaches names to roles from these rows.
CREATE TABLE speaker_names (
    name TEXT NOT NULL,
    role TEXT NOT NULL,
    addressed INTEGER NOT NULL DEFAULT 0,
    introduced INTEGER NOT NULL DEFAULT 0,
    written TEXT NOT NULL DEFAULT '',     -- the name as first written (the reader's view)
    PRIMARY KEY (name, role)
) WITHOUT ROWID;
-- Each role's messages whose text names no speaker of its own: a name attached to the role
-- counts as said in them.
CREATE TABLE roles (
    role TEXT PRIMARY KEY,
    unnamed INTEGER NOT NULL
) WITHOUT ROWID;
"""
_GENERIC_ROLES_SQL = ", ".join(f"'{role}'" for role in sorted(GENERIC_ROLES))

# Refuses deleting audit rows; only deleting the whole user drops it for its one transaction.
AUDIT_DELETE_GUARD = """
CREATE TRIGGER audit_refuses_deletes BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""

# What the lifecycle adds beside the messages (SHARD_SCHEMA and migration 5 make them alike):
# its indexes of the messages, and its tables.
_LIFECYCLE_INDEXES = """
-- A statement by its keyed text hash: replays and tombstones are found here, not by scanning.
CREATE INDEX messages_by_fingerprint ON messages (fingerprint) WHERE fingerprint IS NOT NULL;
-- What a default read must leave out (replaced or unconfirmed statements): usually nothing, and
-- this index answers "is there any?" without reading the messages.
CREATE INDEX messages_withheld ON messages (id, retired_ms, trust)
    WHERE retired_ms IS NOT NULL OR trust != 'confirmed';
"""
_LIFECYCLE = _LIFECYCLE_INDEXES + """

-- A forgotten or rejected statement leaves its keyed text hash (never its text), so remembering
-- it again is refused unless the caller says it is intended.
CREATE TABLE tombstones (
    fingerprint BLOB PRIMARY KEY,
    removed_ms INTEGER NOT NULL,
    reason TEXT NOT NULL                  -- 'forget' or 'reject'
) WITHOUT ROWID;

-- Every change to this user's memory, appended and never edited (the triggers refuse it): who
-- (actor: http, cli, mcp), what (action), when, which messages, the Add's request id, and a
-- keyed hash of the content (HMAC with this file's secret, so it confirms nothing without the
-- file, and nothing at all once deletion has replaced the secret).
CREATE TABLE audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms INTEGER NOT NULL,
    action TEXT NOT NULL,
    actor TEXT NOT NULL,
    message_ids TEXT NOT NULL,            -- JSON list of the messages.id concerned
    request_id TEXT,
    content_hash TEXT
);
CREATE TRIGGER audit_refuses_updates BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
""" + AUDIT_DELETE_GUARD + """
-- The key of this file's keyed hashes; deleting the user replaces it.
INSERT OR IGNORE INTO meta (key, value) VALUES ('secret', lower(hex(randomblob(32))));
"""

SHARD_SCHEMA = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

{_MESSAGES_TABLE}
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
""" + _LIFECYCLE + _LINKS_INDEX + _SPEAKERS + _MESSAGES_BY_SESSION_OUTLINED + _SESSIONS_BY_TIME

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
{_MESSAGES_V4.replace("CREATE TABLE messages (", "CREATE TABLE messages_v4 (")}
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
    # 5: the lifecycle (lifecycle.py, audit.py): each message's record time, event time, trust
    # and origin, supersession links and a keyed text hash; tombstones; the append-only audit
    # log. Columns are added at the end (older SQLite can add no other way); a message stored
    # before keeps its request's receive time as its record time (the nearest request at or
    # before its id took it: an Add's ids are consecutive), and counts as said by a person.
    """
    ALTER TABLE messages ADD COLUMN recorded_ms INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE messages ADD COLUMN valid_ms INTEGER;
    ALTER TABLE messages ADD COLUMN retired_ms INTEGER;
    ALTER TABLE messages ADD COLUMN superseded_by INTEGER;
    ALTER TABLE messages ADD COLUMN origin TEXT NOT NULL DEFAULT 'user';
    ALTER TABLE messages ADD COLUMN trust TEXT NOT NULL DEFAULT 'confirmed';
    ALTER TABLE messages ADD COLUMN fingerprint BLOB;
    CREATE INDEX requests_by_first_id ON requests (first_message_id);
    UPDATE messages SET recorded_ms = coalesce((SELECT created_ms FROM requests
        WHERE first_message_id <= messages.id ORDER BY first_message_id DESC LIMIT 1), timestamp_ms);
    DROP INDEX requests_by_first_id;
    """ + _LIFECYCLE,
    # 6: each message's token estimate (analysis/tokens.py), for the answer window
    # (engine/window.py). SQL cannot make the estimate: the rows stored before keep NULL, which
    # a Search estimates from the text when it reads them, until `reindex` stores them.
    """
    ALTER TABLE messages ADD COLUMN tokens INTEGER;
    """,
    # 7: what a Search's rankers read of a message's features, stored at Add time beside it
    # instead of parsed from the features at every Search: the update and date marks as bits,
    # and the names, numbers, dates and speaker as keys between newlines. Derived here from the
    # stored features (the array form, and the object form of stores older still), so the
    # upgrade reads no text again; the keys by KEYS_FUNCTION, exactly as an Add writes them
    # (SQLite's JSON functions cut a string at a NUL: "Bob\0Mallory" became the speaker "Bob").
    f"""
    ALTER TABLE messages ADD COLUMN marks INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE messages ADD COLUMN signal_keys TEXT NOT NULL DEFAULT '';
    UPDATE messages SET
        marks = CASE WHEN coalesce(json_extract(features, CASE json_type(features) WHEN 'array'
                                        THEN '$[4]' ELSE '$.update' END), 0) THEN 1 ELSE 0 END
              | CASE WHEN coalesce(json_array_length(features, CASE json_type(features)
                                        WHEN 'array' THEN '$[3]' ELSE '$.dates' END), 0) > 0
                     THEN 2 ELSE 0 END,
        signal_keys = {KEYS_FUNCTION}(features);
    """,
    # 8: the conversation links in an index of their own (a Search follows every hit's links).
    _LINKS_INDEX,
    # 9: who is who in the conversation, found in its text (analysis/speakers.py), and the dates
    # each message gives relative to its day (the reader's view; NULL until `reindex`). Each role's
    # messages that name no speaker of their own are counted here from the stored keys (a
    # generic role's message names one when its keys hold a speaker: its "Name: " prefix); the
    # names the texts give need the texts read, which SQL cannot do: `reindex` finds them in
    # the messages stored before, an Add in its own.
    _SPEAKERS + f"""
    ALTER TABLE messages ADD COLUMN told TEXT;
    INSERT INTO roles (role, unnamed)
    SELECT role, count(*) FROM messages
    WHERE lower(trim(role)) NOT IN ({_GENERIC_ROLES_SQL}) OR instr(signal_keys, char(10) || 's:') = 0
    GROUP BY role;
    """,
    # 10: the sessions in time order, and the conversation order carrying each message's outline,
    # for the answer window (engine/window.py).
    f"""
    DROP INDEX messages_by_session;
    {_MESSAGES_BY_SESSION_OUTLINED_V10}
    """ + _SESSIONS_BY_TIME,
    # 11: the keys of a file upgraded through migration 7 before it kept NULs, written again
    # where the features hold one (JSON writes a NUL as the six characters \u0000).
    f"""
    UPDATE messages SET signal_keys = {KEYS_FUNCTION}(features)
    WHERE instr(features, '\\u0000') > 0;
    """,
    # 12: each message's Add's place among its session's Adds, from the request that stored it
    # (its messages took the ids first_message_id .. + stored - 1), and the conversation index
    # ordered by it. `reindex` then links and segments each session in that order (the links
    # stored before follow arrival among messages said at one instant in different Adds).
    f"""
    ALTER TABLE messages ADD COLUMN said INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX requests_by_first_id ON requests (first_message_id);
    UPDATE messages SET said = coalesce((SELECT {ORDER_FUNCTION}(request_id) FROM requests
        WHERE first_message_id <= messages.id ORDER BY first_message_id DESC LIMIT 1), 0);
    DROP INDEX requests_by_first_id;
    DROP INDEX messages_by_session;
    {_MESSAGES_BY_SESSION_OUTLINED}
    """,
    # 13: the reader's notes and the speakers' evidence as the reader's view now writes them
    # (analysis/dates.py: notes exactly as precise as their phrase; analysis/speakers.py: a
    # message gives a name once, an opener is told from an address). The notes stored before
    # are dropped: a Search reads them again from the text (as for a row stored before
    # migration 9) until `reindex` stores them. So are the names' mentions and counts, which
    # counted a message once a spelling and took openers for addresses: until `reindex` finds
    # them again, only the messages added since give names (unnamed is better than wrong).
    """
    UPDATE messages SET told = NULL WHERE told IS NOT NULL;
    DELETE FROM speaker_mentions;
    DELETE FROM speaker_names;
    """,
    # 14: a message's features are no longer stored. A Search reads what it needs of them from
    # its marks and signal keys (migration 7), and removing a message reads its speaker from its
    # text: the JSON said the same again, 31 of the 608 bytes a 1k-message user's message takes
    # (docs/BENCHMARKS.md). The table is copied into its new shape as migration 4 copied it
    # (every id and the id sequence kept), and its indexes made again.
    f"""
{_MESSAGES_V14.replace("CREATE TABLE messages (", "CREATE TABLE messages_v14 (")}
    INSERT INTO messages_v14 ({MESSAGE_COLUMNS_V14}) SELECT {MESSAGE_COLUMNS_V14} FROM messages;
    DELETE FROM sqlite_sequence WHERE name = 'messages_v14';
    UPDATE sqlite_sequence SET name = 'messages_v14' WHERE name = 'messages';
    DROP TABLE messages;
    ALTER TABLE messages_v14 RENAME TO messages;
    """ + _LIFECYCLE_INDEXES + _LINKS_INDEX + _MESSAGES_BY_SESSION_OUTLINED,
)
