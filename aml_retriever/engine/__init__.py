"""The retrieval engine: a Search from its question to its ranked evidence. The stages in order:
`query` (plan the question, with `focus`), `candidates` (FTS5 lists), `retrieval` (the pipeline
that runs the rest in order, over the messages of `rows`): `hits` (the index hits and the views
from them, the hop round in `hops`, a named speaker's name counted in their turns by `speakers`),
`facts` (the candidates, the facts about them and the fused lists, the question's words from
`words`, its names, numbers, dates and speakers as `keys` finds them in the candidates' stored
keys), `scoring` (feature rankers), `fusion` (weighted reciprocal-rank fusion and selection),
`reorder` (supersession, and one fact's versions from `versions`), `provenance` (each result's
flags and explanation); after them, with `answer_window_tokens`, `window` (the context that fills a
reader's window). What the stages read of a user's file is kept for the next Searches of the same
state of it by `held`; every tie between messages is broken by when they were said (`said`),
never by the order their Adds arrived in.

May import: `storage`, `analysis`, `common`. Knows nothing of HTTP, MCP or request bodies.
"""
