"""The HTTP transport: the selector loop that accepts, reads and times connections
(`connections`), request framing, authentication and dispatch (`server`), the route table
(`routes`), the inspector page (`inspector`, files in `ui/`), access logs (`logs`) and
`GET /metrics` (`metrics`). Parses, calls the memory service, formats: no logic of its own.

May import: `memory`, `common`, and the top-level `settings`. Never SQL: the store reaches the
transport only as an object handed to the memory layer.
"""
