"""Memory for agents: the project's and the account's memories over one engine (`scopes`), and
the Model Context Protocol server on stdio that offers them as tools (`mcp_server`), and a
project's registration of that server with its MCP clients (`registration`).

May import: `memory`, `engine`, `storage`, `analysis`, `common`.
"""
