"""The HTTP transport: the selector loop that accepts, reads and times connections (`connections`), the
protocol's rules for reading a request and answering early (`framing`), the key check (`auth`), the
worker pool and the handler that dispatches one request (`server`), turns at the service by user
(`turns`), the route table (`routes`),
refused connections closed gently (`lingering`), the inspector page (`inspector`, files in `ui/`),
access logs (`logs`) and `GET /metrics` (`metrics`). Parses, calls the memory service, formats: no
logic of its own.

May import: `memory`, `common`, and the top-level `settings`. Never SQL: the store reaches the
transport only as an object handed to the memory layer.
"""
