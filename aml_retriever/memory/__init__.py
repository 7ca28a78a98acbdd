"""The memory service: what a transport calls. Request bodies in and typed requests out
(`validation`), Add, Search, delete and stats (`service`), the life of an agent's statement
(`lifecycle`), pages of users, sessions and messages (`listing`), export and import
(`exchange`).

May import: `engine`, `storage`, `analysis`, `common`.
"""
