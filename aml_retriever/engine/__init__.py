"""The retrieval engine: a Search from its question to its ranked evidence. The stages in order:
`query` (plan the question, with `focus`), `candidates` (FTS5 lists), `retrieval` (the pipeline:
views from hits, facts about candidates, the hop round in `hops`), `scoring` (feature rankers),
`fusion` (weighted reciprocal-rank fusion and selection), `versions` (one fact's versions).

May import: `storage`, `analysis`, `common`. Knows nothing of HTTP, MCP or request bodies.
"""
