"""aml_retriever: a deterministic, evidence-first memory retriever for LLM agents."""

# The one place the version is written: pyproject.toml reads it (dynamic version), and
# `--version`, GET /health, the MCP server's serverInfo and docs/changelog.md follow it.
__version__ = "0.7.0"
