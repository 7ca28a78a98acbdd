"""The memory service: what a transport calls. Request bodies in and typed requests out
(`validation`); the facade transports call (`service`) over its parts, which share a base
(`parts`): the Add path (`writes`), Search and reads of stored messages (`reads`), the reader's
view of an answer's messages, with their day, time and speaker (`reader_view`), deleting a
user and forgetting messages (`removal`), reindex and stats over every user file (`upkeep`), and
the index rows, links and segments derived from messages (`derived`). The life of an agent's
statement (`lifecycle`), pages of users, sessions and messages (`listing`) with cursors no
client can forge (`cursors`), export and import (`exchange`).

May import: `engine`, `storage`, `analysis`, `common`.
"""
